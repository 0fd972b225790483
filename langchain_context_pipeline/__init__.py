"""Keep long LangChain/LangGraph agent conversations under a token budget.

Cheapest way first: free pruning of old, bulky content, then one summary of the
middle turns, then a hard cut that makes the budget a guarantee.
"""

from langchain_context_pipeline.briefs import BUILTIN_BRIEFS, ToolBrief, brief_for
from langchain_context_pipeline.condenser import (
    CONDENSED_TAG,
    DIGEST,
    Condenser,
    CondenseStats,
    is_pipeline_summary,
)
from langchain_context_pipeline.pipeline import (
    CompressionReport,
    CompressionResult,
    ContextPipeline,
    RunningSummary,
)
from langchain_context_pipeline.pruner import Pruner, PruneStats
from langchain_context_pipeline.tokens import (
    TokenCounter,
    estimate_tokens,
    resolve_token_counter,
    tiktoken_counter,
)
from langchain_context_pipeline.truncate import hard_truncate

__all__ = [
    "BUILTIN_BRIEFS",
    "CONDENSED_TAG",
    "DIGEST",
    "CompressionReport",
    "CompressionResult",
    "CondenseStats",
    "Condenser",
    "ContextPipeline",
    "PruneStats",
    "Pruner",
    "RunningSummary",
    "TokenCounter",
    "ToolBrief",
    "brief_for",
    "estimate_tokens",
    "hard_truncate",
    "is_pipeline_summary",
    "resolve_token_counter",
    "tiktoken_counter",
]

__version__ = "0.1.0"
