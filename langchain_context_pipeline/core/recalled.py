"""The planner's two steps with the summary memory: recall a summary, remember one.

Both are sans-IO generators like the planner: they yield a
:class:`~langchain_context_pipeline.stages.summary_memory.StoreRead` or
:class:`~langchain_context_pipeline.stages.summary_memory.StoreWrite` when the memory
has a store, and the driver answers it.
"""

from __future__ import annotations

from collections.abc import Generator

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

__all__ = ["recall_summary", "remember_summary"]


def recall_summary(
    memory: SummaryMemory, prefixes: Prefixes, where: Split
) -> Generator[StoreRead, Reply, tuple[int, CarriedSummary] | None]:
    """Find the longest remembered summary of a span ``[head_end, stop)``.

    Returns ``stop`` (a unit end of this list) and the summary, or None.
    """
    start = where.head_end
    if start >= where.size:
        return None
    anchor = memory.anchor(prefixes, start)
    if memory.store is not None and not memory.known(anchor):
        yield StoreRead(anchor)
    stops = sorted(end for end in where.unit_ends if end > start)
    return memory.lookup(prefixes, start, stops)


def remember_summary(
    memory: SummaryMemory,
    prefixes: Prefixes,
    work: list[BaseMessage],
    where: Split,
    shift: int,
    report: CompressionReport,
    kept: list[BaseMessage],
) -> Generator[StoreWrite, Reply, None]:
    """Remember the summary the model just wrote, by the caller's span it replaces.

    ``work`` and ``where`` are the list right after condensing; ``shift`` is how
    many messages fewer than the caller's list ``work`` has before the tail (a
    carried summary stood in for its turns); ``kept`` is the pass's output, which
    must still hold the summary unchanged.
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
    anchor, entries = memory.remember(prefixes, where.head_end, stop, summary)
    if memory.store is not None:
        yield StoreWrite(anchor, entries)
