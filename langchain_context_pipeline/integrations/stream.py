"""The custom stream event of a compressing call, on LangGraph's stream writer.

An entry-point module (it imports ``langgraph``), used by the hook and the
middleware: a run streamed with ``stream_mode="custom"`` (or a list holding it)
receives one :func:`~langchain_context_pipeline.core.events.report_event` dict per
model call whose request the pipeline changed, and nothing on no-op calls.
"""

from __future__ import annotations

from langgraph.config import get_stream_writer

from langchain_context_pipeline.core.events import report_event
from langchain_context_pipeline.core.report import CompressionReport

__all__ = ["emit"]


def emit(report: CompressionReport) -> None:
    """Write the event for ``report`` to the graph's stream, if any.

    Outside a graph run (the hook or the middleware called directly) there is no
    stream writer, and nothing is written.
    """
    event = report_event(report)
    if event is None:
        return
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # no runnable context, or not inside a graph
        return
    writer(event)
