"""What one pass of the pipeline did: the report, nested by stage, and the result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.hysteresis import StandingCuts
from langchain_context_pipeline.stages.stats import CondenseStats, PruneStats, TruncateStats

__all__ = ["CompressionReport", "CompressionResult"]


@dataclass
class CompressionReport:
    """What one pass of the pipeline did, stage by stage.

    A stage that did not run has ``None`` for its stats.
    """

    threshold: int
    """The pipeline's budget for the whole request, in tokens."""
    limit: int
    """This call's budget for the messages: ``threshold`` less the reserved tokens."""
    tokens_before: int = 0
    """Tokens of the input."""
    tokens_after: int = 0
    """Tokens of the output."""
    stages: list[str] = field(default_factory=list)
    """The stages that ran, in order: ``prune``, ``condense``, ``truncate``; or
    ``minimal`` alone when the budget could not be met and the smallest valid
    request was sent instead (``over_budget="minimal"``)."""
    summary_reused: bool = False
    """Whether a carried summary from an earlier turn replaced the turns it covers."""
    prune: PruneStats | None = None
    """What the Pruner changed, if it ran."""
    condense: CondenseStats | None = None
    """What the Condenser did, if it ran."""
    truncate: TruncateStats | None = None
    """What hard truncation removed or cut, if it ran."""
    breaker_open: bool = False
    """Whether the summarizer's circuit breaker is open after this pass."""
    correction: float = 1.0
    """The calibration applied (provider tokens per counted token; the hook and the
    middleware set it from the provider's reported usage): ``threshold`` was
    checked as ``threshold / correction`` counted tokens."""
    stable_prefix: int = 0
    """Leading messages of the output that the next compaction leaves byte-identical
    (head, carried summary, what was pruned, condensed or dropped: everything before
    the protected tail); the end of the prefix a provider's prompt cache keeps across
    compactions. On the no-op path, the head and any carried summary."""
    over_budget: int = 0
    """Tokens by which the messages exceed their limit: 0, except for the smallest
    valid request sent when the system messages (or what is sent beside the
    messages) exceed the budget by themselves."""
    cached_prefix_tokens: int | None = None
    """Tokens of the output's longest prefix that repeats, message by message, the
    previous request's output in the same conversation (what a provider's prompt
    cache can reuse); None for a conversation's first request. Conversations are
    told apart by the LangGraph ``thread_id``, else by their first messages."""
    cached_prefix_share: float | None = None
    """``cached_prefix_tokens`` as a share of the output's tokens (per message)."""
    archive_failures: int = 0
    """Originals that could not be kept in the store for recall (their references
    are marked not recallable); 0 when nothing is archived."""
    reserved: int = 0
    """Tokens of the same request spent beside the messages (``reserved_tokens``: a
    system prompt or tool schemas sent separately): ``limit`` is ``threshold``
    less these."""
    cuts: StandingCuts | None = None
    """Where the output's pruning and truncation cuts stand, by message id; the hook
    and the middleware pass them to the next call as ``standing_cuts``. With a
    summarizer only the prune cut (a summary, not a standing drop, takes the place of
    what truncation would cut); ``None`` when the smallest valid request was sent."""

    @property
    def summarizer_calls(self) -> int:
        """Calls made to the summarizer in this pass (0 when the Condenser did not run)."""
        return 0 if self.condense is None else self.condense.summarizer_calls

    @property
    def summary_source(self) -> str | None:
        """``"model"`` or ``"digest"`` when this pass wrote a summary."""
        return None if self.condense is None else self.condense.source

    def as_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict (stage stats nested)."""
        return asdict(self)


@dataclass
class CompressionResult:
    """The output of :meth:`ContextPipeline.compress`."""

    messages: list[BaseMessage]
    """The messages to send to the model."""
    report: CompressionReport
    """What each stage did."""
    carried_summary: CarriedSummary | None = None
    """The summary to carry to the next turn (new, reused, or None)."""
