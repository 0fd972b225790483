"""Tool-call units and the one split of a conversation into head, middle and tail.

A *unit* is a run of consecutive messages that must be kept or removed together:
an AIMessage with tool calls and the ToolMessages answering it (parallel calls
included), or any other single message. Every stage cuts only between units, so
no stage can orphan a tool result or leave a call unanswered.

:class:`Split` is computed once per list and handed to every stage: the units,
where the head ends, where the protected tail starts, and which messages are
system messages (never pruned, summarized or dropped).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage

from langchain_context_pipeline.messages.anatomy import current_pass
from langchain_context_pipeline.messages.blocks import call_ids, pair_results
from langchain_context_pipeline.messages.marks import WRITTEN_KINDS, pipeline_kind

Unit = tuple[int, int]
"""A unit as a half-open index range ``(start, end)``."""


class Meter(Protocol):
    """What the split needs of a token meter (``tokens.meter.Meter`` is one)."""

    def span(self, messages: Sequence[BaseMessage], start: int, end: int) -> int:
        """Return the tokens of ``messages[start:end]``."""
        ...


_SYSTEM_ROLES = frozenset({"system", "developer"})


def is_system(message: BaseMessage) -> bool:
    """Return whether ``message`` acts as a system message (never pruned or summarized).

    A ``SystemMessage``, or a ``ChatMessage`` whose role is ``system`` or ``developer``.
    """
    if isinstance(message, SystemMessage):
        return True
    return isinstance(message, ChatMessage) and message.role in _SYSTEM_ROLES


def group_units(messages: Sequence[BaseMessage]) -> list[Unit]:
    """Split messages into units, as half-open index ranges ``(start, end)``.

    A unit runs from an AIMessage with tool calls to the last message that answers
    one of its calls (a ``ToolMessage``, or an Anthropic ``tool_result`` / Responses
    ``function_call_output`` block); overlapping runs merge. Each result answers the
    nearest preceding open call of its id (see :func:`~._blocks.pair_results`).
    Orphan results and unanswered calls are tolerated as units of their own.
    """
    return _group(len(messages), pair_results(messages))


def _group(n: int, pairs: Mapping[int, list[int]]) -> list[Unit]:
    end_of = list(range(1, n + 1))
    for index, starts in pairs.items():
        for start in starts:
            end_of[start] = max(end_of[start], index + 1)
    units: list[Unit] = []
    start = 0
    while start < n:
        end = end_of[start]
        cursor = start + 1
        while cursor < end:
            end = max(end, end_of[cursor])
            cursor += 1
        units.append((start, end))
        start = end
    return units


def _head_end(messages: Sequence[BaseMessage], units: Sequence[Unit], head_count: int) -> int:
    end = 0
    for start, stop in units:
        if stop > head_count:
            break
        if any(pipeline_kind(messages[i]) in WRITTEN_KINDS for i in range(start, stop)):
            break
        end = stop
    return end


def head_end(messages: Sequence[BaseMessage], head_count: int) -> int:
    """Return where the head of ``messages`` ends: ``Split.of(messages, head_count).head_end``.

    When none of the first ``head_count`` messages makes a tool call, each of them is
    a unit of its own (only a call can open a longer unit), so the head is found
    from them alone, without pairing the whole list; otherwise the list is split.
    """
    first = messages[:head_count]
    if any(call_ids(m) for m in first):
        return Split.of(messages, head_count).head_end
    return _head_end(messages, [(i, i + 1) for i in range(len(first))], head_count)


@dataclass(frozen=True)
class Split:
    """One list's units, head, tail and system messages, computed once per list."""

    units: tuple[Unit, ...]
    """The list's units in order."""
    head_end: int
    """Messages ``[0, head_end)`` are the head, kept verbatim."""
    tail_start: int
    """Messages ``[tail_start, n)`` are the protected tail (``n`` until a tail is set)."""
    systems: frozenset[int]
    """Indices of the messages that act as system messages."""
    size: int
    """The number of messages split."""
    pairing: tuple[object, tuple[BaseMessage, ...], Mapping[int, list[int]]] | None = field(
        default=None, compare=False, repr=False
    )
    """``(pass, messages, pair_results(messages))`` from :meth:`of` in a
    :func:`~.anatomy.one_pass` block (see :meth:`pairs_for`)."""

    @classmethod
    def of(cls, messages: Sequence[BaseMessage], head_count: int) -> Split:
        """Split ``messages``: the head is the whole units among the first ``head_count``.

        A tool unit that reaches past ``head_count`` is not part of the head (the
        task is the system prompt and the user's request, not a tool result). The
        head stops before any message the pipeline wrote (a prior summary or note),
        so a summary is merged, never frozen into the head.
        """
        pairs = pair_results(messages)
        units = tuple(_group(len(messages), pairs))
        systems = frozenset(
            i
            for i, m in enumerate(messages)
            if isinstance(m, SystemMessage)  # is_system, inlined: it runs on every message
            or (isinstance(m, ChatMessage) and m.role in _SYSTEM_ROLES)
        )
        n = len(messages)
        token = current_pass()
        pairing = None if token is None else (token, tuple(messages), pairs)
        return cls(units, _head_end(messages, units, head_count), n, systems, n, pairing)

    def pairs_for(self, messages: Sequence[BaseMessage]) -> Mapping[int, list[int]] | None:
        """Return ``pair_results(messages)`` as :meth:`of` found it, or None.

        Only in the :func:`~.anatomy.one_pass` block that split, whose messages are
        not edited, and for the very messages split (not a list of as many others).
        """
        if self.pairing is None:
            return None
        token, split, pairs = self.pairing
        if token is not current_pass() or len(split) != len(messages):
            return None
        return pairs if all(map(operator.is_, split, messages)) else None

    @property
    def unit_ends(self) -> frozenset[int]:
        """The indices at which a unit ends (valid cut points)."""
        return frozenset(end for _, end in self.units)

    def with_tail(self, messages: Sequence[BaseMessage], budget: int, meter: Meter) -> Split:
        """Return this split with the protected tail: newest whole units within ``budget``.

        The last unit is always in the tail, whatever its size; the tail never
        reaches into the head. The start snaps to a checkpoint (see :func:`snap_forward`)
        every half ``budget`` tokens. (The pipeline places its prune boundary by the
        low-water mark instead: see ``stages.hysteresis``.)
        """
        if not self.units:
            return replace(self, tail_start=0)
        used = 0
        start = self.size
        for unit_start, unit_end in reversed(self.units):
            if unit_start < self.head_end:
                break
            cost = meter.span(messages, unit_start, unit_end)
            if start != self.size and used + cost > budget:
                break
            used += cost
            start = unit_start
        start = max(start, self.head_end)
        return replace(
            self,
            tail_start=snap_forward(messages, self.units, start, max(budget // 2, 1), meter),
        )

    def substitute(self, start: int, stop: int, kept: int) -> Split:
        """Return the split of the list where ``[start, stop)`` became ``kept + 1`` messages.

        ``start`` and ``stop`` are unit boundaries; the new messages (``kept`` system
        messages, then one summary) are units of one message each.
        """
        shift = start + kept + 1 - stop
        units = [u for u in self.units if u[1] <= start]
        units += [(i, i + 1) for i in range(start, start + kept + 1)]
        units += [(a + shift, b + shift) for a, b in self.units if a >= stop]
        systems = {i for i in self.systems if i < start}
        systems.update(range(start, start + kept))
        systems.update(i + shift for i in self.systems if i >= stop)
        size = self.size + shift
        return Split(tuple(units), self.head_end, size, frozenset(systems), size)


def snap_forward(
    messages: Sequence[BaseMessage],
    units: Sequence[Unit],
    start: int,
    step: int,
    meter: Meter,
) -> int:
    """Move a cut at ``start`` forward to the next *checkpoint*, a cut that rarely moves.

    Checkpoints are the unit starts where the running token count from the first
    message enters a new multiple of ``step``. They depend only on the messages
    before them, so as a conversation grows a cut snapped to them stays put until
    the history has grown by about ``step`` tokens: every turn in between sends the
    same prefix, which a provider's prompt cache can reuse. The last unit's start
    is always a checkpoint, so the cut never passes the newest message.
    """
    if not units or start >= units[-1][0]:
        return start
    position = 0
    bucket = -1
    for unit_start, unit_end in units:
        if unit_start >= start and position // step != bucket:
            return unit_start
        bucket = position // step
        position += meter.span(messages, unit_start, unit_end)
    return units[-1][0]
