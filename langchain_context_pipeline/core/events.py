"""What a compressing call tells the outside: a stream event and trace metadata.

In a chain, :class:`ContextPipeline`'s own run carries the same metadata
(:func:`attach_report`). The entry points (the LangGraph hook, the agent
middleware) run each pass through
:func:`compress_traced` / :func:`acompress_traced`: the pass gets a run of its own
in traces, named after the pipeline (``ContextPipeline``), with the summarizer's
run (``context_condenser``) inside it and the report's essentials as the run's
metadata, so LangSmith shows what the pass did on the run itself. After a pass
that changed the request, the entry points emit :func:`report_event` on
LangGraph's stream writer (``stream_mode="custom"``).

Only ``langchain-core`` is imported here; the stream writer is the entry points'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    BaseCallbackManager,
    CallbackManagerForChainRun,
)
from langchain_core.runnables import RunnableConfig, ensure_config, patch_config
from langchain_core.runnables.config import (
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    set_config_context,
)
from langchain_core.runnables.utils import coro_with_context

from langchain_context_pipeline.core.report import CompressionReport, CompressionResult

if TYPE_CHECKING:  # the pipeline imports this module for its own runs
    from langchain_context_pipeline.core.pipeline import ContextPipeline

__all__ = [
    "EVENT_TYPE",
    "METADATA_PREFIX",
    "acompress_traced",
    "attach_report",
    "compress_traced",
    "essentials",
    "report_event",
    "trace_metadata",
]

EVENT_TYPE = "context_pipeline"
"""The ``type`` of the custom stream event a compressing call emits."""

METADATA_PREFIX = "context_pipeline_"
"""The prefix of the trace metadata keys (flat keys, so LangSmith can filter on them)."""


def essentials(report: CompressionReport) -> dict[str, Any]:
    """Return what a reader of a stream or a trace wants from ``report``.

    Args:
        report: the report of one pass.

    Returns:
        ``tokens_before``, ``tokens_after``, ``threshold``, ``limit``, ``stages``,
        ``summary_written`` (this pass wrote a summary), ``summary_reused`` (a
        carried summary stood in for the turns it covers), ``summary_source``
        (``"model"``, ``"digest"`` or ``None``) and ``summarizer_calls``.
    """
    written = report.condense is not None and report.condense.source is not None
    return {
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "threshold": report.threshold,
        "limit": report.limit,
        "stages": list(report.stages),
        "summary_written": written,
        "summary_reused": report.summary_reused,
        "summary_source": report.summary_source,
        "summarizer_calls": report.summarizer_calls,
    }


def report_event(report: CompressionReport) -> dict[str, Any] | None:
    """Return the custom stream event for a pass, or ``None`` for a no-op pass.

    A pass is a no-op when no stage ran and no carried summary was reused: the
    request went to the model unchanged.
    """
    if not report.stages and not report.summary_reused:
        return None
    return {"type": EVENT_TYPE, **essentials(report)}


def trace_metadata(report: CompressionReport) -> dict[str, Any]:
    """Return the report's essentials as flat, prefixed run metadata."""
    return {METADATA_PREFIX + key: value for key, value in essentials(report).items()}


def _attach(run: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun, meta: Any) -> None:
    """Add ``meta`` to this run in every tracer that records it (LangSmith's included).

    A tracer keeps its runs in ``run_map`` and sends a chain run's metadata with the
    run's end, so metadata added before ``on_chain_end`` shows on the run.
    """
    for handler in run.handlers:
        runs = getattr(handler, "run_map", None)
        record = runs.get(str(run.run_id)) if isinstance(runs, Mapping) else None
        if record is not None and hasattr(record, "add_metadata"):
            record.add_metadata(meta)


def attach_report(
    run: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun, report: CompressionReport
) -> None:
    """Add the report's :func:`trace_metadata` to ``run`` (before it ends)."""
    _attach(run, trace_metadata(report))


def _child(config: RunnableConfig, manager: BaseCallbackManager) -> RunnableConfig:
    return patch_config(config, callbacks=manager)


def compress_traced(pipeline: ContextPipeline, messages: Any, **keywords: Any) -> CompressionResult:
    """Run :meth:`ContextPipeline.compress` as a traced run with the report as metadata.

    Args:
        pipeline: the pipeline.
        messages: the conversation.
        **keywords: passed to :meth:`ContextPipeline.compress`.
    """
    config = ensure_config()
    manager = get_callback_manager_for_config(config)
    run = manager.on_chain_start(None, {"input": messages}, name=pipeline.name, run_type="chain")
    try:
        with set_config_context(_child(config, run.get_child())) as context:
            result = context.run(pipeline.compress, messages, **keywords)
    except BaseException as exc:
        run.on_chain_error(exc)
        raise
    attach_report(run, result.report)
    run.on_chain_end({"output": result.messages})
    return result


async def acompress_traced(
    pipeline: ContextPipeline, messages: Any, **keywords: Any
) -> CompressionResult:
    """Async :func:`compress_traced`: the summarizer is awaited."""
    config = ensure_config()
    manager = get_async_callback_manager_for_config(config)
    run = await manager.on_chain_start(
        None, {"input": messages}, name=pipeline.name, run_type="chain"
    )
    try:
        with set_config_context(_child(config, run.get_child())) as context:
            result = await coro_with_context(pipeline.acompress(messages, **keywords), context)
    except BaseException as exc:
        await run.on_chain_error(exc)
        raise
    attach_report(run, result.report)
    await run.on_chain_end({"output": result.messages})
    return result


Refit = Callable[[CompressionResult, dict[str, Any], bool], "dict[str, Any] | None"]
"""Given a pass's result, its arguments and whether it is the last try: the arguments to
compress again with (a smaller budget), or ``None`` when the result is the one to send."""


def compress_fitted(
    pipeline: ContextPipeline, messages: Any, args: dict[str, Any], refit: Refit, attempts: int
) -> tuple[CompressionResult, dict[str, Any]]:
    """Run :func:`compress_traced`, again while ``refit`` asks, ``attempts`` passes at most.

    Returns:
        The result to send and the arguments it was compressed with.
    """
    result = compress_traced(pipeline, messages, **args)
    for attempt in range(2, attempts + 1):
        again = refit(result, args, attempt == attempts)
        if again is None:
            break
        args = again
        result = compress_traced(pipeline, messages, **args)
    return result, args


async def acompress_fitted(
    pipeline: ContextPipeline, messages: Any, args: dict[str, Any], refit: Refit, attempts: int
) -> tuple[CompressionResult, dict[str, Any]]:
    """Async :func:`compress_fitted`: the summarizer is awaited."""
    result = await acompress_traced(pipeline, messages, **args)
    for attempt in range(2, attempts + 1):
        again = refit(result, args, attempt == attempts)
        if again is None:
            break
        args = again
        result = await acompress_traced(pipeline, messages, **args)
    return result, args
