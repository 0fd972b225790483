"""Hard truncation: the last resort that makes the token budget a guarantee.

Keeps the head (the task), every system message, the last unit (the newest
message is never dropped), prior pipeline summaries where they fit, then as many
whole tail units as fit, and one note saying how many messages were removed. When
what must be kept exceeds the budget by itself, the largest kept messages are cut
in the middle with a visible marker, as many as needed, system messages last.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_pipeline._checks import check_int
from langchain_context_pipeline._coerce import coerce_messages
from langchain_context_pipeline._meter import Meter
from langchain_context_pipeline._trim import cut_middle, with_cut_args
from langchain_context_pipeline._units import Split, snap_forward
from langchain_context_pipeline.digest import build_index
from langchain_context_pipeline.marks import pipeline_kind, pipeline_mark
from langchain_context_pipeline.tokens import message_text, resolve_token_counter

__all__ = ["TruncateStats", "hard_truncate", "truncate"]

logger = logging.getLogger("langchain_context_pipeline")

_KEEP_BLOCKS = frozenset({"text", "tool_use", "tool_call"})


@dataclass
class TruncateStats:
    """What one truncation pass did."""

    trimmed: int = 0
    """Messages removed (LangChain's *trim*: whole messages go)."""
    shortened: int = 0
    """Kept messages cut in the middle to fit."""
    tokens_after: int = 0
    """Tokens of the whole list after truncation (set by the pipeline)."""


_NOTE_CHARS = 72
"""Room for the note's first line."""


def removal_note(dropped: Sequence[BaseMessage], index_chars: int = 0) -> HumanMessage:
    """Return the note that stands where ``dropped`` messages were removed.

    With ``index_chars``, the note also lists (newest first, within that size)
    the user requests and the paths and commands of the removed turns.
    """
    key = hashlib.sha256()
    for m in dropped:
        key.update((m.id or message_text(m)[:200]).encode("utf-8", "surrogatepass"))
    content = f"[{len(dropped)} earlier messages were removed to fit the context window.]"
    index = build_index(dropped, index_chars, what="removed") if index_chars else ""
    content = f"{content}\n{index}" if index else content
    note_id = f"context-note-{key.hexdigest()[:20]}"
    return HumanMessage(
        content=content,
        id=note_id,
        response_metadata=pipeline_mark("note", content, note_id, dropped=len(dropped)),
    )


def _shrink(message: BaseMessage, excess: int, meter: Meter) -> BaseMessage:
    """Cut ``message`` in the middle until it is ``excess`` tokens smaller, or minimal."""
    target = meter.one(message) - excess
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        message = with_cut_args(message, 64)[0]
        if meter.one(message) <= target:
            return message
    text = message_text(message)
    content: Any = message.content
    if not isinstance(content, str):
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") in _KEEP_BLOCKS]
        others = [b for b in blocks if b.get("type") != "text"]
        content = others
    keep = max(len(text) - excess * 4 - 64, 0)
    while True:
        cut = cut_middle(text, keep * 2 // 3, keep // 3)
        if isinstance(content, str):
            new_content: Any = cut
        else:
            new_content = [{"type": "text", "text": cut}, *content]
        shrunk = message.model_copy(update={"content": new_content})
        if keep == 0 or meter.one(shrunk) <= target:
            return shrunk
        keep //= 2


@dataclass
class _Plan:
    keep: set[int]
    shrunk: dict[int, BaseMessage]
    index_chars: int = 0


def _select(
    messages: Sequence[BaseMessage],
    where: Split,
    budget: int,
    meter: Meter,
) -> _Plan:
    n = len(messages)
    units = where.units
    h = where.head_end
    mandatory = [
        u
        for u in units
        if u[1] <= h or u == units[-1] or any(i in where.systems for i in range(*u))
    ]
    keep: set[int] = {i for u in mandatory for i in range(*u)}
    used = sum(meter.one(messages[i]) for i in keep)
    # The note lists what it replaces in up to a twentieth of the budget, when that fits.
    index_chars = min(budget // 20, 1000) * 4
    note_cost = meter.one(HumanMessage("x" * (_NOTE_CHARS + index_chars)))
    if used + note_cost > budget:
        index_chars = 0
        note_cost = meter.one(HumanMessage("x" * _NOTE_CHARS))
    used += note_cost
    required = set(mandatory)
    summaries: list[tuple[int, int]] = []
    fill: list[tuple[int, int]] = []
    for u in units:
        if u in required:
            continue
        is_summary = any(pipeline_kind(messages[i]) == "summary" for i in range(*u))
        (summaries if is_summary else fill).append(u)
    for u in summaries:
        cost = meter.span(messages, *u)
        if used + cost <= budget:
            keep.update(range(*u))
            used += cost
    first = len(messages)
    room = budget - used
    for u in reversed(fill):
        cost = meter.span(messages, *u)
        if cost > room:
            break
        room -= cost
        first = u[0]
    # Keep the tail from a checkpoint on, so the dropped span (and the note saying
    # so) changes only every quarter budget, not at every turn.
    first = snap_forward(messages, units, first, max(budget // 4, 1), meter)
    for u in fill:
        if u[0] >= first:
            keep.update(range(*u))
            used += meter.span(messages, *u)
    shrunk: dict[int, BaseMessage] = {}
    if used > budget:
        # What must be kept does not fit: cut the largest kept messages, system last.
        order = sorted(
            (i for i in keep if i < n),
            key=lambda i: (i in where.systems, -meter.one(messages[i]), i),
        )
        for i in order:
            excess = used - budget
            if excess <= 0:
                break
            before = meter.one(messages[i])
            shrunk[i] = _shrink(messages[i], excess, meter)
            used -= before - meter.one(shrunk[i])
    return _Plan(keep, shrunk, index_chars)


def _assemble(messages: Sequence[BaseMessage], plan: _Plan) -> list[BaseMessage]:
    dropped = [m for i, m in enumerate(messages) if i not in plan.keep]
    out: list[BaseMessage] = []
    noted = not dropped
    for i, message in enumerate(messages):
        if i not in plan.keep:
            if not noted:
                out.append(removal_note(dropped, plan.index_chars))
                noted = True
            continue
        out.append(plan.shrunk.get(i, message))
    return out


def truncate(
    messages: Sequence[BaseMessage], where: Split, threshold: int, meter: Meter
) -> tuple[list[BaseMessage], TruncateStats]:
    """Cut ``messages`` (split as ``where``) to at most ``threshold`` tokens by ``meter``.

    Returns the new list (a copy of the input when it already fits) and what was
    trimmed or shortened.
    """
    total = meter.total(messages)
    if total <= threshold:
        return list(messages), TruncateStats()
    # A counter that is not a plain sum (framing per request) is met by shrinking
    # the budget by its overhead, and again by whatever the check still finds.
    overhead = 0 if meter.additive else max(total - sum(meter.one(m) for m in messages), 0)
    budget = threshold - overhead
    out: list[BaseMessage] = list(messages)
    plan = _Plan(set(range(len(messages))), {})
    for _ in range(8):
        plan = _select(messages, where, budget, meter)
        out = _assemble(messages, plan)
        excess = meter.total(out) - threshold
        if excess <= 0:
            break
        budget -= excess
    else:
        logger.error(
            "hard truncation could not reach %d tokens: what must be kept is too large", threshold
        )
    stats = TruncateStats(trimmed=len(messages) - len(plan.keep), shortened=len(plan.shrunk))
    return out, stats


def hard_truncate(
    messages: Sequence[BaseMessage] | Any,
    *,
    threshold: int,
    head_count: int = 2,
    token_counter: Any = None,
) -> list[BaseMessage]:
    """Drop middle units (and cut oversize kept messages) to fit ``threshold`` tokens.

    Args:
        messages: the conversation (messages, OpenAI-style dicts or a PromptValue).
        threshold: the budget, in tokens of ``token_counter``.
        head_count: the first N messages, kept (the task).
        token_counter: how tokens are counted (default: the estimate).

    Returns:
        The input list itself when it fits, else a new list within ``threshold``.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> history = [SystemMessage("be brief"), HumanMessage("task")]
        >>> history += [HumanMessage("x" * 400) for _ in range(10)]
        >>> out = hard_truncate(history, threshold=300)
        >>> out[2].content
        '[8 earlier messages were removed to fit the context window.]'
    """
    check_int("threshold", threshold, 1)
    items = coerce_messages(messages)
    meter = Meter(resolve_token_counter(token_counter))
    if meter.total(items) <= threshold:
        return items
    return truncate(items, Split.of(items, head_count), threshold, meter)[0]
