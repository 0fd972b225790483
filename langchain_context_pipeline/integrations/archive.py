"""Originals kept in a LangGraph store, for recall where graph state no longer holds them.

The hook's persist mode rewrites ``messages``, and an LCEL chain keeps no history
at all: there, the originals a pass replaced are written to a ``BaseStore``
(``InMemoryStore`` on one machine, ``PostgresStore`` for many workers) before the
model sees the compressed list, one item per reference under the conversation's
namespace ``("context_pipeline_originals", thread_id)`` (see :func:`namespace` for
a thread id with a period). A store that fails never
fails the pass: the references it could not keep are marked ``(not recallable)``,
the failure is logged and counted in ``report.archive_failures``.

An entry-point helper: it imports LangGraph's store types.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

try:
    from langgraph.store.base import BaseStore, PutOp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "keeping originals in a store needs LangGraph: "
        "pip install 'langchain-context-pipeline[langgraph]'"
    ) from exc

from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.messages.anatomy import RESULT_MESSAGES
from langchain_context_pipeline.messages.blocks import pair_results
from langchain_context_pipeline.messages.references import (
    RefIndex,
    call_of,
    find_refs,
    format_ref,
    own_span,
    stands_in,
    written_text,
)
from langchain_context_pipeline.messages.trim import replace_text
from langchain_context_pipeline.messages.values import jsonable
from langchain_context_pipeline.tokens.counters import message_text

__all__ = [
    "NAMESPACE",
    "ORIGINALS_NAMESPACE",
    "aarchive_originals",
    "archive_originals",
    "namespace",
    "plan_records",
    "read_record",
    "thread_of",
]

logger = logging.getLogger("langchain_context_pipeline")

ORIGINALS_NAMESPACE = "context_pipeline_originals"
"""The first label of every archive namespace; the thread id follows (see :func:`namespace`).

Persisted: archives written by every version are under it."""

NAMESPACE = ORIGINALS_NAMESPACE
"""The former name of :data:`ORIGINALS_NAMESPACE`."""

UNRECALLABLE = " (not recallable)"
"""Written after a reference whose original could not be kept."""


_ESCAPED = "escaped"
"""The second label of the namespace of a thread id a store cannot take as one label."""


def namespace(thread_id: str) -> tuple[str, ...]:
    """Return the store namespace of one conversation's originals.

    A thread id a store accepts as a namespace label (no period, no NUL, not empty)
    is the label itself, as archives have always been written. Any other id
    (``user@example.com``, ``session.42``), which ``BaseStore.get`` would reject,
    goes percent-encoded (``%``, ``.`` and NUL) under a third label:
    ``("context_pipeline_originals", "escaped", "=user@example%2Ecom")``. Three
    labels never name the namespace of a two-label id, and the encoding is
    reversible, so every thread id has a namespace of its own.
    """
    label = str(thread_id)
    if label and "." not in label and "\x00" not in label:
        return (ORIGINALS_NAMESPACE, label)
    quoted = label.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")
    return (ORIGINALS_NAMESPACE, _ESCAPED, f"={quoted}")


def thread_of(config: Mapping[str, Any] | None) -> str | None:
    """Return ``config["configurable"]["thread_id"]`` as text, or None when absent."""
    configurable = (config or {}).get("configurable")
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    return None if thread is None or thread == "" else str(thread)


def plan_records(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage]
) -> dict[str, dict[str, Any]]:
    """Return the store items a pass needs: ``{reference: value}``.

    For every reference written in a message the pass made (one not in
    ``before``), the originals it names in ``before`` that leave the view: a
    message item (``{"kind": "message", "message": ..., "call": ...}``) per
    message, and a span item (``{"kind": "span", "members": [...]}``) for the span
    a summary or removal note stands for (only those write spans: a span written
    in any other text is not the pipeline's). A message that is itself a stand-in
    (a brief from an earlier pass) is not written: its original was written when
    it was briefed. ``before`` is indexed once, so the cost is linear in the
    history and the references written, and every value is JSON-safe
    (:func:`~langchain_context_pipeline.messages.values.jsonable`), for any store.
    """
    index = RefIndex(before)
    before_ids = {id(m) for m in before}
    kept = {id(m) for m in after}
    paired = pair_results(before)
    records: dict[str, dict[str, Any]] = {}
    walked: set[int] = set()
    for message in after:
        if id(message) in before_ids:
            continue
        span = own_span(message)
        for ref in find_refs(written_text(message)):
            if ref in records or (".." in ref and ref != span):
                continue
            found = index.bounds(ref)
            if found is None:
                continue
            start, stop = found
            if ".." in ref:
                records[ref] = {"kind": "span", "members": index.refs[start : stop + 1]}
            for at in range(start, stop + 1):
                if at in walked:
                    continue
                walked.add(at)
                member, key = before[at], index.refs[at]
                if id(member) in kept or key in records or stands_in(member):
                    continue
                records[key] = {
                    "kind": "message",
                    "message": {"type": member.type, "data": jsonable(dict(member))},
                    "call": jsonable(_call(before, paired.get(at), member)),
                }
    return records


def _call(
    before: Sequence[BaseMessage], makers: list[int] | None, member: BaseMessage
) -> dict[str, Any] | None:
    """Return ``{"name", "args"}`` of the call a ToolMessage or FunctionMessage answers."""
    if not isinstance(member, RESULT_MESSAGES) or not makers:
        return None
    return call_of(member, [before[makers[0]]])


def _mark_unrecallable(messages: list[BaseMessage], refs: set[str]) -> list[BaseMessage]:
    """Return ``messages`` with ``(not recallable)`` after each of ``refs`` in their text."""
    out: list[BaseMessage] = []
    for message in messages:
        text = message_text(message)
        named = [r for r in find_refs(text) if r in refs]
        for ref in named:
            text = text.replace(format_ref(ref), format_ref(ref) + UNRECALLABLE)
        if named:
            message = message.model_copy(update={"content": replace_text(message, text)})
        out.append(message)
    return out


def _ops(thread: str, records: Mapping[str, dict[str, Any]]) -> list[PutOp]:
    space = namespace(thread)
    return [PutOp(space, key, value, index=False) for key, value in records.items()]


def _with_failure(
    result: CompressionResult, records: Mapping[str, Any], error: str | None
) -> CompressionResult:
    """Return ``result`` with ``records`` marked not recallable when archiving failed.

    ``error`` says why (logged, and counted in ``report.archive_failures``); None
    when the originals were kept, and ``result`` is returned as it is.
    """
    if error is None:
        return result
    logger.warning(
        "originals not archived (%s): %d reference(s) not recallable", error, len(records)
    )
    result.report.archive_failures += len(records)
    result.messages = _mark_unrecallable(result.messages, set(records))
    return result


def archive_originals(
    store: BaseStore,
    thread_id: str | None,
    before: Sequence[BaseMessage],
    result: CompressionResult,
) -> CompressionResult:
    """Write the originals ``result`` replaced to ``store``, in one batch; never raise.

    Args:
        store: the LangGraph store.
        thread_id: the conversation's id (the run config's ``thread_id``); without
            one nothing is written and the references are marked not recallable.
        before: the messages the pass compressed.
        result: what :meth:`ContextPipeline.compress` returned for them.

    Returns:
        ``result``, its references marked ``(not recallable)`` and
        ``report.archive_failures`` counted when the store failed.
    """
    records, error = _plan(thread_id, before, result)
    if records and error is None:
        try:
            store.batch(_ops(thread_id or "", records))
        except Exception as exc:  # degrade, never fail
            error = f"{type(exc).__name__}: {exc}"
    return _with_failure(result, records, error)


async def aarchive_originals(
    store: BaseStore,
    thread_id: str | None,
    before: Sequence[BaseMessage],
    result: CompressionResult,
) -> CompressionResult:
    """Async :func:`archive_originals`."""
    records, error = _plan(thread_id, before, result)
    if records and error is None:
        try:
            await store.abatch(_ops(thread_id or "", records))
        except Exception as exc:  # degrade, never fail
            error = f"{type(exc).__name__}: {exc}"
    return _with_failure(result, records, error)


def _plan(
    thread_id: str | None, before: Sequence[BaseMessage], result: CompressionResult
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Return the records a pass archives, and why they cannot be written (if known now)."""
    records = plan_records(before, result.messages)
    return records, "no thread_id in the run's config" if records and thread_id is None else None


def read_record(
    store: BaseStore, thread_id: str, ref: str
) -> tuple[list[BaseMessage], dict[str, Any] | None] | None:
    """Return the archived messages a reference names (and a tool result's call), or None.

    Raises:
        Exception: whatever the store raises (recall turns it into a tool message).
    """
    space = namespace(thread_id)
    item = store.get(space, ref)
    if item is None or not isinstance(item.value, Mapping):
        return None
    value = item.value
    if value.get("kind") == "span":
        members: list[BaseMessage] = []
        for key in (str(k) for k in value.get("members", [])):
            got = store.get(space, key)
            if got is not None and isinstance(got.value, Mapping) and "message" in got.value:
                members.extend(messages_from_dict([got.value["message"]]))
        return members, None
    if "message" not in value:
        return None
    call = value.get("call")
    return messages_from_dict([value["message"]]), call if isinstance(call, dict) else None
