"""Keep long LangChain/LangGraph agent conversations under a token budget.

Cheapest way first: free pruning of old, bulky content, then one summary of the
middle turns, then a hard cut that makes the budget a guarantee.

:func:`load_transcript` (read a saved conversation file) lives with the command
line in :mod:`langchain_context_pipeline.cli.transcripts`; it is imported from
there on first use, so importing the package does not load the command line.
"""

from typing import TYPE_CHECKING, Any

from langchain_context_pipeline import _moved
from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.core.report import CompressionReport, CompressionResult
from langchain_context_pipeline.errors import BudgetError, ContextPipelineError, SummaryTimeoutError
from langchain_context_pipeline.messages.marks import CONDENSED_TAG, is_pipeline_summary
from langchain_context_pipeline.stages.briefs import BUILTIN_BRIEFS, BriefFunction, brief_for
from langchain_context_pipeline.stages.carried import SUMMARY_STATE_KEY, CarriedSummary
from langchain_context_pipeline.stages.condenser import Condenser, CondenseStats
from langchain_context_pipeline.stages.digest import DIGEST
from langchain_context_pipeline.stages.pruner import Pruner, PruneStats
from langchain_context_pipeline.stages.settings import (
    CondenseSettings,
    PipelineSettings,
    PruneSettings,
)
from langchain_context_pipeline.stages.summary_memory import SummaryMemory
from langchain_context_pipeline.stages.truncate import TruncateStats, hard_truncate
from langchain_context_pipeline.tokens import (
    TokenCounter,
    estimate_tokens,
    resolve_token_counter,
    tiktoken_counter,
)
from langchain_context_pipeline.tokens.exact import exact_token_counter

if TYPE_CHECKING:
    from langchain_context_pipeline.cli.transcripts import load_transcript

__all__ = [
    "BUILTIN_BRIEFS",
    "CONDENSED_TAG",
    "DIGEST",
    "SUMMARY_STATE_KEY",
    "BriefFunction",
    "BudgetError",
    "CarriedSummary",
    "CompressionReport",
    "CompressionResult",
    "CondenseSettings",
    "CondenseStats",
    "Condenser",
    "ContextPipeline",
    "ContextPipelineError",
    "PipelineSettings",
    "PruneSettings",
    "PruneStats",
    "Pruner",
    "SummaryMemory",
    "SummaryTimeoutError",
    "TokenCounter",
    "TruncateStats",
    "brief_for",
    "estimate_tokens",
    "exact_token_counter",
    "hard_truncate",
    "is_pipeline_summary",
    "load_transcript",
    "resolve_token_counter",
    "tiktoken_counter",
]

__version__ = "0.1.0"

_moved.install()

# Names imported from outside the core on first use: name -> module.
_LAZY = {"load_transcript": "langchain_context_pipeline.cli.transcripts"}


def __getattr__(name: str) -> Any:
    """Import :data:`_LAZY` names on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
