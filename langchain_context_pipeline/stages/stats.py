"""What each stage did in one pass: the stats the report nests, stage by stage.

The report (:mod:`langchain_context_pipeline.core.report`) needs these types and
nothing else of the stages; each stage's module re-exports its own.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CondenseStats", "PruneStats", "TruncateStats"]


@dataclass
class PruneStats:
    """What one pruning pass changed."""

    briefed: int = 0
    """Tool results replaced by a one-line brief (``ToolMessage``s and result blocks)."""
    args_shortened: int = 0
    """AI messages whose tool-call arguments were cut."""
    texts_shortened: int = 0
    """AI messages whose text was cut to its head and tail."""
    tokens_after: int = 0
    """Tokens of the whole list after pruning (set by the pipeline)."""

    def add(self, other: PruneStats) -> None:
        """Add the counts of ``other`` (one message's pruning) to these."""
        self.briefed += other.briefed
        self.args_shortened += other.args_shortened
        self.texts_shortened += other.texts_shortened


@dataclass
class CondenseStats:
    """What one condensing pass did."""

    condensed: int = 0
    """Messages replaced by the summary (a merged prior summary included)."""
    summarizer_calls: int = 0
    """Calls made to the summarizer."""
    summarizer_failures: int = 0
    """Summaries the model could not write (an unusable reply, a prompt that could not
    be built); the digest stood in."""
    source: str | None = None
    """``"model"`` or ``"digest"``: who wrote the summary, if one was written."""
    failure: str | None = None
    """Why the last summarizer call was rejected, if it was."""
    summarizer_skipped: int = 0
    """Summaries the digest wrote because the circuit breaker was open."""
    breaker_opened: bool = False
    """Whether this pass's failure opened the circuit breaker."""
    breaker_open: bool = False
    """Whether this conversation's circuit breaker is open after this pass."""
    tokens_after: int = 0
    """Tokens of the whole list after condensing (set by the pipeline)."""


@dataclass
class TruncateStats:
    """What one truncation pass did."""

    trimmed: int = 0
    """Messages removed (LangChain's *trim*: whole messages go)."""
    shortened: int = 0
    """Kept messages cut in the middle to fit."""
    tokens_after: int = 0
    """Tokens of the whole list after truncation (set by the pipeline)."""
    note_index: int | None = None
    """Characters the removal note's index was given (``None``: nothing dropped)."""
