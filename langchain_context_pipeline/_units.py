"""Messages as tool-call units, the head/middle/tail split, and input coercion.

A *unit* is a run of consecutive messages that must be kept or removed together:
an AIMessage with tool calls and the ToolMessages answering it (parallel calls
included), or any other single message. Every stage cuts only between units, so
no stage can orphan a tool result or leave a call unanswered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue

from langchain_context_pipeline.tokens import (
    TokenCounter,
    estimate_message_tokens,
    estimate_tokens,
    tool_call_ids,
)

METADATA_KEY = "context_pipeline"
"""Key in ``response_metadata`` under which the pipeline marks the messages it wrote."""


WRITTEN_KINDS = frozenset({"summary", "note"})
"""Kinds of whole messages the pipeline writes (a brief only rewrites a tool result)."""


def coerce_messages(value: Any) -> list[BaseMessage]:
    """Return ``value`` as a list of messages; a list of messages is returned as is.

    Accepts a sequence of ``BaseMessage``, OpenAI-style dicts, ``(role, text)``
    tuples or strings, and a ``PromptValue``.

    Raises:
        TypeError: naming the index and type of the first item that is not a message.
    """
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, BaseMessage | str | bytes | dict) or not isinstance(value, Sequence):
        raise TypeError(f"expected a list of messages or a PromptValue, got {type(value).__name__}")
    if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
        return value
    out: list[BaseMessage] = []
    for index, item in enumerate(value):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        if not isinstance(item, dict | tuple | str):
            raise TypeError(
                f"messages[{index}] is {type(item).__name__}, expected a BaseMessage, "
                "an OpenAI-style dict, a (role, content) tuple or a string"
            )
        try:
            out.extend(convert_to_messages([item]))
        except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
            raise TypeError(f"messages[{index}] cannot be read as a message: {exc}") from exc
    return out


def pipeline_kind(message: BaseMessage) -> str | None:
    """Return what the pipeline wrote this message as (``"summary"``, ``"note"``), or None."""
    meta = message.response_metadata.get(METADATA_KEY)
    if isinstance(meta, dict):
        kind = meta.get("kind")
        return kind if isinstance(kind, str) else None
    return None


def group_units(messages: Sequence[BaseMessage]) -> list[tuple[int, int]]:
    """Split messages into units, as half-open index ranges ``(start, end)``.

    A unit runs from an AIMessage with tool calls to the last ToolMessage that
    answers one of its calls; overlapping runs merge. Orphan ToolMessages and
    unanswered calls are tolerated as units of their own.
    """
    n = len(messages)
    end_of = list(range(1, n + 1))
    open_calls: dict[str, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            start = open_calls.get(message.tool_call_id)
            if start is not None:
                end_of[start] = max(end_of[start], index + 1)
        else:
            for cid in tool_call_ids(message):
                open_calls[cid] = index
    units: list[tuple[int, int]] = []
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


class Meter:
    """Per-message token counts for one call, with the counter's total as the judge."""

    def __init__(self, counter: TokenCounter) -> None:
        """Measure with ``counter``."""
        self.counter = counter
        self._default = counter is estimate_tokens
        self._cache: dict[int, tuple[BaseMessage, int]] = {}

    def one(self, message: BaseMessage) -> int:
        """Return the tokens of one message (cached for this call)."""
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = estimate_message_tokens(message) if self._default else int(self.counter([message]))
        self._cache[id(message)] = (message, tokens)
        return tokens

    def total(self, messages: Sequence[BaseMessage]) -> int:
        """Return the counter's own total for ``messages``.

        The default estimate is a plain sum, so it reuses the per-message counts;
        any other counter is asked for the whole list (it may add framing).
        """
        if self._default:
            return sum(self.one(m) for m in messages)
        return int(self.counter(messages))

    def seed(self, messages: Sequence[BaseMessage], counts: Sequence[int]) -> None:
        """Remember per-message counts already computed for ``messages``."""
        for message, tokens in zip(messages, counts, strict=True):
            self._cache[id(message)] = (message, tokens)

    @property
    def additive(self) -> bool:
        """Whether the total is the sum of the per-message counts."""
        return self._default

    def span(self, messages: Sequence[BaseMessage], start: int, end: int) -> int:
        """Return the summed per-message tokens of ``messages[start:end]``."""
        return sum(self.one(messages[i]) for i in range(start, end))


@dataclass(frozen=True)
class Split:
    """Where the head ends and the tail starts, on unit boundaries."""

    head_end: int
    """Messages ``[0, head_end)`` are the head, kept verbatim."""
    tail_start: int
    """Messages ``[tail_start, n)`` are the protected tail; ``tail_start >= head_end``."""


def head_end(messages: Sequence[BaseMessage], units: list[tuple[int, int]], head_count: int) -> int:
    """Return where the head ends: the whole units among the first ``head_count`` messages.

    A tool unit that reaches past ``head_count`` is not part of the head (the task
    is the system prompt and the user's request, not a tool result). The head
    stops before any message the pipeline wrote (a prior summary or note), so a
    summary is merged, never frozen into the head.
    """
    end = 0
    for start, stop in units:
        if stop > head_count:
            break
        if any(pipeline_kind(messages[i]) in WRITTEN_KINDS for i in range(start, stop)):
            break
        end = stop
    return end


def tail_start(
    messages: Sequence[BaseMessage],
    units: list[tuple[int, int]],
    budget: int,
    meter: Meter,
    floor: int = 0,
) -> int:
    """Return where the protected tail starts: newest whole units within ``budget``.

    The last unit is always in the tail, whatever its size. The tail never
    reaches into ``[0, floor)``.
    """
    if not units:
        return 0
    used = 0
    start = len(messages)
    for unit_start, unit_end in reversed(units):
        if unit_start < floor:
            break
        cost = meter.span(messages, unit_start, unit_end)
        if start != len(messages) and used + cost > budget:
            break
        used += cost
        start = unit_start
    return snap_forward(messages, units, max(start, floor), max(budget // 2, 1), meter)


def snap_forward(
    messages: Sequence[BaseMessage],
    units: list[tuple[int, int]],
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


def split(
    messages: Sequence[BaseMessage],
    *,
    head_count: int,
    tail_budget: int,
    meter: Meter,
) -> tuple[list[tuple[int, int]], Split]:
    """Group ``messages`` into units and find the head and the tail."""
    units = group_units(messages)
    end = head_end(messages, units, head_count)
    return units, Split(end, tail_start(messages, units, tail_budget, meter, floor=end))


def is_system(message: BaseMessage) -> bool:
    """Return whether ``message`` is a system message (never pruned or summarised)."""
    return isinstance(message, SystemMessage)
