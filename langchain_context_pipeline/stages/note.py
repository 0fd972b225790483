"""The removal note that stands where truncation dropped messages, and its price.

:func:`removal_note` builds the note (its id hashes every message it replaces, its
index reads every one of them). :class:`NotePricer` gives the same note's tokens
for a growing run of dropped units without building it: it reads each unit once,
keeps the index entries as it goes, and renders only what the index can hold, so
pricing the note at every step of a replay costs what the history holds, not its
square.

Truncation prices the note before it knows what the note replaces
(:func:`note_room`), so the note is held to that price by the token counter in
use: its index is cut by characters first, then further until the note costs no
more than it was priced at (escaped lone surrogates, control characters and dense
scripts cost more tokens per character than the price's stand-in).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.messages.marks import pipeline_mark
from langchain_context_pipeline.messages.references import format_ref, span_ref
from langchain_context_pipeline.stages.digest import (
    add_entries,
    answered_by,
    index_entries,
    index_of,
    render_index,
)
from langchain_context_pipeline.tokens.counters import message_text
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["NotePricer", "note_price", "note_room", "removal_note"]

_NOTE_CHARS = 100
"""Room for the note's first line."""

_WHAT = "removed"


def _first_line(count: int, span: str) -> str:
    named = f" ({format_ref(span)})" if span else ""
    return f"[{count} earlier messages were removed to fit the context window{named}.]"


_STAND_IN = _first_line(999_999, "ffffffff..ffffffff")
"""The first line a note is priced with: a six-digit count and a span of two references."""


def _note(content: str, note_id: str, count: int, span: str) -> HumanMessage:
    fields: dict[str, Any] = {"dropped": count}
    if span:
        fields["span"] = span
    return HumanMessage(
        content=content,
        id=note_id,
        response_metadata=pipeline_mark("note", content, note_id, **fields),
    )


def note_price(index_chars: int, meter: Meter) -> int:
    """Return the tokens a removal note with an index of ``index_chars`` is priced at.

    A note built with a meter never costs more (see :func:`removal_note`): the price
    is that of ``index_chars`` plain letters after the first line (or after its
    room of a hundred letters, if the counter charges that more).
    """
    letters = "x" * index_chars
    return max(
        meter.one(HumanMessage("x" * _NOTE_CHARS + letters)),
        meter.one(HumanMessage(f"{_STAND_IN}\n{letters}" if letters else _STAND_IN)),
    )


def _held(
    first: str,
    index: Callable[[int], str],
    index_chars: int,
    note: Callable[[str], HumanMessage],
    meter: Meter | None,
) -> HumanMessage:
    """Return the ``note`` of ``first`` and an index (``index(chars)``) of ``index_chars``.

    With ``meter``, the index is cut further while the note costs more than
    :func:`note_price`; the first line is never cut.
    """
    price = note_price(index_chars, meter) if meter is not None and index_chars else 0
    chars = index_chars
    while True:
        text = index(chars) if chars else ""
        built = note(f"{first}\n{text}" if text else first)
        if not text or meter is None or meter.one(built) <= price:
            return built
        chars = chars * 4 // 5


def removal_note(
    dropped: Sequence[BaseMessage], index_chars: int = 0, meter: Meter | None = None
) -> HumanMessage:
    """Return the note that stands where ``dropped`` messages were removed.

    With ``index_chars``, the note also lists (newest first, within that size)
    the user requests and the paths and commands of the removed turns; with
    ``meter`` too, that index is cut until the note costs no more than
    :func:`note_price` by it.
    """
    key = hashlib.sha256()
    for m in dropped:
        key.update((m.id or message_text(m)[:200]).encode("utf-8", "surrogatepass"))
    note_id = f"context-note-{key.hexdigest()[:20]}"
    span = span_ref(dropped) if dropped else ""
    newest = index_of(dropped) if index_chars else {}

    def index(chars: int) -> str:
        return render_index(newest, chars, what=_WHAT)

    def note(content: str) -> HumanMessage:
        return _note(content, note_id, len(dropped), span)

    return _held(_first_line(len(dropped), span), index, index_chars, note, meter)


def note_room(
    budget: int, used: int, meter: Meter, index_chars: int | None = None
) -> tuple[int, int]:
    """Return the removal note's index size (chars) and its price in tokens.

    The note lists what it replaces in up to a twentieth of the budget (or in the
    given ``index_chars``: the size a conversation's standing cut was made with, so
    that its note does not change with the budget), when that fits beside the
    ``used`` tokens of what must be kept; built with ``meter``, it costs no more than
    that price (see :func:`removal_note`).
    """
    if index_chars is None:
        index_chars = min(budget // 20, 1000) * 4
    note_cost = note_price(index_chars, meter)
    if used + note_cost > budget:
        index_chars = 0
        note_cost = note_price(0, meter)
    return index_chars, note_cost


class NotePricer:
    """The tokens of :func:`removal_note` over the dropped units ``[0, drop)``, for any ``drop``.

    The dropped messages are those of the units that may go (``stays`` False).
    The note's text is the one :func:`removal_note` writes with ``meter`` (the same
    first line and the same index, held to the same price); only its id, which no
    token counter reads as content, is not the hash of every dropped message.
    Consecutive calls with a growing ``drop`` read each unit once; a smaller
    ``drop`` starts the reading over.
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

        def index(chars: int) -> str:
            return render_index(self._newest, chars, what=_WHAT)

        def note(content: str) -> HumanMessage:
            return _note(content, "context-note-" + "0" * 20, self._count, span)

        first = _first_line(self._count, span)
        return self._meter.one(_held(first, index, self._index_chars, note, self._meter))
