"""Replay a saved transcript turn by turn, as an agent would have sent it.

Before each assistant message, the history so far is what the agent sent to its
model. :func:`replay` runs the pipeline on each such request, carrying the
running summary from turn to turn as the LangGraph hook does, and records the
tokens sent with and without the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.stages.carried import CarriedSummary

__all__ = ["ReplayResult", "Turn", "replay"]


@dataclass(frozen=True)
class Turn:
    """One model call of the replayed run."""

    index: int
    """Position of the assistant message this request produced."""
    tokens_without: int
    """Tokens the request had with no management."""
    tokens_with: int
    """Tokens the pipeline sent."""
    stages: tuple[str, ...]
    """The pipeline stages that ran for this request."""
    summarizer_calls: int
    """Summarizer calls made for this request."""
    cached_tokens: int | None = None
    """Tokens of this request that repeat the previous one's prefix (what a prompt
    cache can reuse); None for the first request."""


@dataclass
class ReplayResult:
    """Every turn of a replay, with totals."""

    turns: list[Turn] = field(default_factory=list)
    """The model calls, in order."""

    @property
    def tokens_without(self) -> int:
        """Tokens sent over the session with no management."""
        return sum(t.tokens_without for t in self.turns)

    @property
    def tokens_with(self) -> int:
        """Tokens sent over the session with the pipeline."""
        return sum(t.tokens_with for t in self.turns)

    @property
    def summarizer_calls(self) -> int:
        """Summarizer calls over the session."""
        return sum(t.summarizer_calls for t in self.turns)

    @property
    def cached_share(self) -> float:
        """Share of the tokens sent that repeat the previous request's prefix."""
        cached = sum(t.cached_tokens or 0 for t in self.turns)
        return cached / max(self.tokens_with, 1)


def replay(
    messages: Sequence[BaseMessage],
    pipeline: ContextPipeline,
    *,
    on_turn: Callable[[Turn, int], None] | None = None,
) -> ReplayResult:
    """Replay ``messages`` turn by turn through ``pipeline``.

    Messages without an id get a stable one (``m<index>``), as a checkpointer
    would give them, so the running summary can say which turns it covers.

    Args:
        messages: The saved conversation.
        pipeline: The pipeline each request goes through.
        on_turn: Called after each model call is replayed, with its turn and the
            number of model calls in all (to show progress: a summarizer makes
            some turns slow).

    Returns:
        Every turn, in order.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> run = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("bye"), AIMessage("ok")]
        >>> [t.tokens_without for t in replay(run, ContextPipeline()).turns]
        [6, 22]
    """
    history = [m if m.id else m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(messages)]
    result = ReplayResult()
    running: CarriedSummary | None = None
    calls = [i for i, message in enumerate(history) if i and isinstance(message, AIMessage)]
    for index in calls:
        compressed = pipeline.compress(history[:index], carried_summary=running)
        running = compressed.carried_summary
        report = compressed.report
        result.turns.append(
            Turn(
                index=index,
                tokens_without=report.tokens_before,
                tokens_with=report.tokens_after,
                stages=tuple(report.stages),
                summarizer_calls=report.summarizer_calls,
                cached_tokens=report.cached_prefix_tokens,
            )
        )
        if on_turn is not None:
            on_turn(result.turns[-1], len(calls))
    return result
