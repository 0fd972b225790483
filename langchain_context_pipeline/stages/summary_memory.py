"""Summaries remembered by the exact span they replace, so each is bought once.

The LangGraph hook and the agent middleware carry the running summary in graph
state. A caller that carries nothing (an LCEL chain ``prompt | pipeline | model``
called once per turn on the growing history, the command line replaying a
transcript) would otherwise pay to summarize the same turns again on every call.
:class:`SummaryMemory` remembers each summary the model wrote under a digest of
the messages it replaced *and everything before them* (the head: the task), ids
and content alike. The next call finds the longest remembered span that is still
there, verbatim, and reuses its summary exactly as a carried summary. The hook and
the middleware ask it too, before they pay for a summary: a step run again with the
state it had (a retried model call, a replay from an earlier checkpoint) carries an
older summary than the one that step bought. A pass that truncated after its summary
remembers the list it was given, so that the same list again is truncated the same
way rather than planned anew.

Keying by content, never by position or by call, keeps independent conversations
apart: ``batch`` over many conversations, or two interleaved ones through one
pipeline, can only meet a summary of their own turns.

Many processes: pass ``store=``, any object with LangGraph ``BaseStore``'s
``get(namespace, key)`` / ``put(namespace, key, value)`` (and ``aget`` / ``aput``
for the async path), e.g. ``InMemoryStore`` or ``PostgresStore``. A ``BaseStore``
was chosen over a LangChain cache because it is the store LangGraph deployments
already run (namespaced, JSON values, sync and async, shared by every worker),
while a LangChain LLM cache is keyed by prompt text and would only help when the
prompt, and so the whole span, is identical: it cannot find the longest remembered
prefix of a longer history. It is duck-typed here, so the core does not import
langgraph. A summary read from the store is used only when its signed mark
verifies (tools can read and write the graph's store), so workers that share one
need the same ``CONTEXT_PIPELINE_MARK_KEY``; the hook and the middleware carry
their summary in graph state, which needs no key (see :mod:`.marks`).

Only summaries the model wrote are remembered: the deterministic digest costs
nothing to write again, and leaving it out keeps a pipeline without a model
exactly as deterministic as a fresh instance.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.errors import check_int
from langchain_context_pipeline.messages.snapshot import Transient
from langchain_context_pipeline.messages.values import dumps
from langchain_context_pipeline.stages.carried import CarriedSummary

__all__ = ["SUMMARY_NAMESPACE", "StoreRead", "StoreWrite", "SummaryMemory", "SummaryStore"]

logger = logging.getLogger("langchain_context_pipeline")

SUMMARY_NAMESPACE = ("context_pipeline", "summaries")
"""The store namespace the summaries are written under (persisted: never changes)."""

NAMESPACE = SUMMARY_NAMESPACE
"""The former name of :data:`SUMMARY_NAMESPACE`."""

_ENTRIES_PER_ANCHOR = 16


@runtime_checkable
class SummaryStore(Protocol):
    """The part of LangGraph's ``BaseStore`` the memory uses (sync side)."""

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        """Return the item stored under ``key`` (with a ``.value`` dict), or None."""

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
        """Store ``value`` under ``key``."""


@dataclass(frozen=True)
class StoreRead:
    """A request, yielded by the planner, to read an anchor's entries from the store."""

    anchor: str


@dataclass(frozen=True)
class StoreWrite:
    """A request, yielded by the planner, to write an anchor's entries to the store."""

    anchor: str
    entries: list[dict[str, Any]]


def _fingerprint(message: BaseMessage) -> bytes:
    fields = [
        message.type,
        message.id,
        message.name,
        message.content,
        getattr(message, "tool_calls", None),
        getattr(message, "tool_call_id", None),
        getattr(message, "role", None),
    ]
    text = dumps(fields, sort_keys=True)  # any value, any depth, alike in every process
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Prefixes:
    """Chained digests of one list's prefixes: ``digest(k)`` covers ``messages[:k]``."""

    def __init__(self, messages: Sequence[BaseMessage]) -> None:
        """Digest lazily: only as far as a lookup asks."""
        self._messages = messages
        self._chain = [hashlib.sha256(b"context-pipeline-span").digest()]

    def digest(self, k: int) -> str:
        """Return the digest of ``messages[:k]``."""
        chain = self._chain
        while len(chain) <= k:
            chain.append(
                hashlib.sha256(chain[-1] + _fingerprint(self._messages[len(chain) - 1])).digest()
            )
        return chain[k].hex()


class SummaryMemory(Transient):
    """A bounded memory of summaries, safe under threads and asyncio.

    Entries are grouped by *anchor* (the digest of the head and the first message
    a summary replaces); each entry holds where its span ends, the digest of
    everything up to there, and the summary.

    Example:
        >>> memory = SummaryMemory(max_entries=128)
        >>> len(memory)
        0
    """

    def __init__(self, max_entries: int = 256, *, store: Any = None) -> None:
        """Configure the memory.

        Args:
            max_entries: summaries kept in this process (least recently used go first).
            store: a shared store for many processes: any object with ``BaseStore``'s
                ``get``/``put`` (and ``aget``/``aput`` for async use), or None.

        Raises:
            TypeError: when ``store`` lacks ``get`` and ``put``.
            ValueError: when ``max_entries`` is not a positive whole number.
        """
        check_int("max_entries", max_entries, 1)
        if store is not None and not isinstance(store, SummaryStore):
            raise TypeError(
                "store must have BaseStore's get(namespace, key) and put(namespace, key, "
                f"value) methods, got {type(store).__name__}"
            )
        self.max_entries = max_entries
        self.store: Any = store
        self._lock = threading.Lock()
        self._anchors: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._size = 0

    def __len__(self) -> int:
        """Return how many summaries are held in this process."""
        with self._lock:
            return self._size

    def clear(self) -> None:
        """Forget every summary held in this process (the store is left alone)."""
        with self._lock:
            self._anchors.clear()
            self._size = 0

    @staticmethod
    def anchor(prefixes: Prefixes, start: int) -> str:
        """Return the anchor of a span starting at ``start``."""
        return prefixes.digest(start + 1)

    def known(self, anchor: str) -> bool:
        """Whether this process holds entries for ``anchor``."""
        with self._lock:
            return anchor in self._anchors

    def lookup(
        self, prefixes: Prefixes, start: int, stops: Sequence[int]
    ) -> tuple[int, CarriedSummary] | None:
        """Return the longest remembered span ``[start, stop)`` among ``stops``, if any."""
        anchor = self.anchor(prefixes, start)
        with self._lock:
            entries = list(self._anchors.get(anchor, ()))
            if entries:
                self._anchors.move_to_end(anchor)
        allowed = set(stops)
        for entry in sorted(entries, key=lambda e: -int(e["stop"])):
            stop = int(entry["stop"])
            if stop in allowed and prefixes.digest(stop) == entry["digest"]:
                summary = entry["summary"]
                if not isinstance(summary, CarriedSummary):
                    try:
                        summary = CarriedSummary.from_dict(summary)
                    except ValueError:
                        continue
                return stop, summary
        return None

    def load(self, anchor: str, entries: Any) -> None:
        """Take the entries a store held for ``anchor`` (ignoring anything malformed)."""
        good = [
            e
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, dict) and isinstance(e.get("stop"), int) and "digest" in e
        ]
        with self._lock:
            self._put(anchor, good)

    def truncated_after(self, prefixes: Prefixes, start: int, stop: int, size: int) -> bool:
        """Whether the pass that wrote the summary of ``[start, stop)`` was given this list.

        True when that pass truncated the list after its summary, and the list was
        ``messages[:size]`` (the one ``prefixes`` digests): truncating the list again,
        the summary in place, gives that pass's output, without a second summary.
        """
        anchor = self.anchor(prefixes, start)
        with self._lock:
            entries = list(self._anchors.get(anchor, ()))
        return any(
            e["stop"] == stop
            and e.get("truncated_at") == size
            and e.get("truncated_digest") == prefixes.digest(size)
            for e in entries
        )

    def remember(
        self,
        prefixes: Prefixes,
        start: int,
        stop: int,
        summary: CarriedSummary,
        truncated_at: int | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """Remember ``summary`` for ``[start, stop)``; return the anchor and its entries.

        ``truncated_at``: when the pass truncated its list after the summary, the
        size of the list it was given (``prefixes`` digests it): see
        :meth:`truncated_after`.
        """
        anchor = self.anchor(prefixes, start)
        entry: dict[str, Any] = {"stop": stop, "digest": prefixes.digest(stop), "summary": summary}
        if truncated_at is not None:
            entry["truncated_at"] = truncated_at
            entry["truncated_digest"] = prefixes.digest(truncated_at)
        with self._lock:
            entries = [e for e in self._anchors.get(anchor, []) if e["stop"] != stop]
            entries.append(entry)
            self._put(anchor, entries[-_ENTRIES_PER_ANCHOR:])
            kept = list(self._anchors.get(anchor, []))
        return anchor, [
            {**e, "summary": e["summary"].to_dict()}
            if isinstance(e["summary"], CarriedSummary)
            else e
            for e in kept
        ]

    def _put(self, anchor: str, entries: list[dict[str, Any]]) -> None:
        old = self._anchors.pop(anchor, [])
        self._size -= len(old)
        if not entries:
            return
        self._anchors[anchor] = entries
        self._size += len(entries)
        while self._size > self.max_entries and self._anchors:
            _, dropped = self._anchors.popitem(last=False)
            self._size -= len(dropped)

    # -- the shared store ------------------------------------------------------------

    # A store that fails costs a summary, never the call: the failure is logged.

    def answer(self, request: StoreRead | StoreWrite) -> None:
        """Answer a planner's store request with the store's sync ``get``/``put``."""
        try:
            if isinstance(request, StoreRead):
                self.load(
                    request.anchor, _entries(self.store.get(SUMMARY_NAMESPACE, request.anchor))
                )
            else:
                self.store.put(SUMMARY_NAMESPACE, request.anchor, {"entries": request.entries})
        except Exception as exc:
            logger.warning("summary store failed (%s: %s)", type(exc).__name__, exc)

    async def aanswer(self, request: StoreRead | StoreWrite) -> None:
        """Answer a planner's store request with the store's ``aget``/``aput``."""
        try:
            if isinstance(request, StoreRead):
                item = await self.store.aget(SUMMARY_NAMESPACE, request.anchor)
                self.load(request.anchor, _entries(item))
            else:
                await self.store.aput(
                    SUMMARY_NAMESPACE, request.anchor, {"entries": request.entries}
                )
        except Exception as exc:
            logger.warning("summary store failed (%s: %s)", type(exc).__name__, exc)


def _entries(item: Any) -> Any:
    value = getattr(item, "value", item)
    return value.get("entries") if isinstance(value, dict) else None
