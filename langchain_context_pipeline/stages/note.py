"""The removal note that stands where truncation dropped messages, and its price.

:func:`removal_note` builds the note (its id hashes every message it replaces, its
index reads every one of them). :class:`NotePricer` gives the same note's tokens
for a growing run of dropped units without building it: it reads each unit once,
keeps the index entries as it goes, and renders only what the index can hold, so
pricing the note at every step of a replay costs what the history holds, not its
square.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.messages.marks import pipeline_mark
from langchain_context_pipeline.messages.references import format_ref, span_ref
from langchain_context_pipeline.stages.digest import (
    add_entries,
    answered_by,
    build_index,
    index_entries,
    render_index,
)
from langchain_context_pipeline.tokens.counters import message_text
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["NotePricer", "note_room", "removal_note"]

_NOTE_CHARS = 100
"""Room for the note's first line."""

_WHAT = "removed"


def _first_line(count: int, span: str) -> str:
    named = f" ({format_ref(span)})" if span else ""
    return f"[{count} earlier messages were removed to fit the context window{named}.]"


def _note(content: str, note_id: str, count: int, span: str) -> HumanMessage:
    fields: dict[str, Any] = {"dropped": count}
    if span:
        fields["span"] = span
    return HumanMessage(
        content=content,
        id=note_id,
        response_metadata=pipeline_mark("note", content, note_id, **fields),
    )


def removal_note(dropped: Sequence[BaseMessage], index_chars: int = 0) -> HumanMessage:
    """Return the note that stands where ``dropped`` messages were removed.

    With ``index_chars``, the note also lists (newest first, within that size)
    the user requests and the paths and commands of the removed turns.
    """
    key = hashlib.sha256()
    for m in dropped:
        key.update((m.id or message_text(m)[:200]).encode("utf-8", "surrogatepass"))
    span = span_ref(dropped) if dropped else ""
    content = _first_line(len(dropped), span)
    index = build_index(dropped, index_chars, what=_WHAT) if index_chars else ""
    content = f"{content}\n{index}" if index else content
    return _note(content, f"context-note-{key.hexdigest()[:20]}", len(dropped), span)


def note_room(budget: int, used: int, meter: Meter) -> tuple[int, int]:
    """Return the removal note's index size (chars) and its cost in tokens.

    The note lists what it replaces in up to a twentieth of the budget, when that
    fits beside the ``used`` tokens of what must be kept.
    """
    index_chars = min(budget // 20, 1000) * 4
    note_cost = meter.one(HumanMessage("x" * (_NOTE_CHARS + index_chars)))
    if used + note_cost > budget:
        index_chars = 0
        note_cost = meter.one(HumanMessage("x" * _NOTE_CHARS))
    return index_chars, note_cost


class NotePricer:
    """The tokens of :func:`removal_note` over the dropped units ``[0, drop)``, for any ``drop``.

    The dropped messages are those of the units that may go (``stays`` False).
    The note's text is the one :func:`removal_note` writes (the same first line
    and the same index); only its id, which no token counter reads as content, is
    not the hash of every dropped message. Consecutive calls with a growing
    ``drop`` read each unit once; a smaller ``drop`` starts the reading over.
    """

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        units: Sequence[tuple[int, int]],
        stays: Sequence[bool],
        index_chars: int,
        meter: Meter,
    ) -> None:
        """Price notes over ``units`` of ``messages`` with an index of ``index_chars``."""
        self._messages = messages
        self._units = units
        self._stays = stays
        self._index_chars = index_chars
        self._meter = meter
        self.units_read = 0
        """Units read so far (the work done: each unit once per forward run)."""
        self._start()

    def _start(self) -> None:
        self._upto = 0
        self._count = 0
        self._first: BaseMessage | None = None
        self._last: BaseMessage | None = None
        self._newest: dict[str, str] = {}

    def __call__(self, drop: int) -> int:
        """Return the note's tokens when units ``[0, drop)`` are dropped (0: no note)."""
        if drop < self._upto:
            self._start()
        for j in range(self._upto, drop):
            if self._stays[j]:
                continue
            self.units_read += 1
            start, end = self._units[j]
            unit = self._messages[start:end]
            self._first = self._first or unit[0]
            self._last = unit[-1]
            self._count += len(unit)
            answered = answered_by(unit)
            for position, message in enumerate(unit):
                add_entries(self._newest, index_entries(message, answered.get(position, {})))
        self._upto = max(self._upto, drop)
        if self._first is None or self._last is None:
            return 0
        span = span_ref([self._first, self._last])
        content = _first_line(self._count, span)
        if self._index_chars:
            index = render_index(self._newest, self._index_chars, what=_WHAT)
            content = f"{content}\n{index}" if index else content
        return self._meter.one(_note(content, "context-note-" + "0" * 20, self._count, span))
