"""The planner's two steps with the summary memory: recall a summary, remember one.

Both are sans-IO generators like the planner: they yield a
:class:`~langchain_context_pipeline.stages.summary_memory.StoreRead` or
:class:`~langchain_context_pipeline.stages.summary_memory.StoreWrite` when the memory
has a store, and the driver answers it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.core.report import CompressionReport
from langchain_context_pipeline.messages.marks import is_pipeline_summary
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.model_call import Reply
from langchain_context_pipeline.stages.summary_memory import (
    Prefixes,
    StoreRead,
    StoreWrite,
    SummaryMemory,
)

__all__ = ["Recalled", "recall_summary", "remember_summary"]


@dataclass(frozen=True)
class Recalled:
    """A remembered summary that applies to this list."""

    stop: int
    """The summary stands for ``[head_end, stop)`` (``stop``: a unit end of this list)."""
    summary: CarriedSummary
    replay: bool
    """The pass that wrote it was given this very list and truncated it after the
    summary: truncating again, the summary in place, gives that pass's output."""


def recall_summary(
    memory: SummaryMemory, prefixes: Prefixes, where: Split
) -> Generator[StoreRead, Reply, Recalled | None]:
    """Find the longest remembered summary of a span ``[head_end, stop)``, or None."""
    start = where.head_end
    if start >= where.size:
        return None
    anchor = memory.anchor(prefixes, start)
    if memory.store is not None and not memory.known(anchor):
        yield StoreRead(anchor)
    stops = sorted(end for end in where.unit_ends if end > start)
    found = memory.lookup(prefixes, start, stops)
    if found is None:
        return None
    stop, summary = found
    return Recalled(stop, summary, memory.truncated_after(prefixes, start, stop, where.size))


def remember_summary(
    memory: SummaryMemory,
    prefixes: Prefixes,
    work: list[BaseMessage],
    where: Split,
    shift: int,
    report: CompressionReport,
    kept: list[BaseMessage],
    size: int,
) -> Generator[StoreWrite, Reply, None]:
    """Remember the summary the model just wrote, by the caller's span it replaces.

    ``work`` and ``where`` are the list right after condensing; ``shift`` is how
    many messages fewer than the caller's list ``work`` has before the tail (a
    carried summary stood in for its turns); ``kept`` is the pass's output, which
    must still hold the summary unchanged; ``size``: how many messages the caller
    gave (remembered when the pass truncated after the summary, so that the same
    list given again is truncated again rather than summarized a second time).
    """
    if report.condense is None or report.condense.source != "model":
        return
    middle = range(where.head_end, where.tail_start)
    index = where.head_end + sum(1 for i in middle if i in where.systems)
    if index >= len(work) or not is_pipeline_summary(work[index]):
        return
    if not any(m is work[index] for m in kept):
        return
    summary = CarriedSummary.of(work[index : index + 1])
    if summary is None:  # a span without ids: the summary stands through nothing named
        summary = CarriedSummary(message=work[index], through="")
    stop = where.tail_start + shift
    truncated = size if report.truncate is not None else None
    anchor, entries = memory.remember(prefixes, where.head_end, stop, summary, truncated)
    if memory.store is not None:
        yield StoreWrite(anchor, entries)
