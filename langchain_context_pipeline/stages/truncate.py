"""Hard truncation: the last resort that makes the token budget a guarantee.

Keeps the head (the task), every system message, the last unit (the newest
message is never dropped), prior pipeline summaries where they fit, then as many
whole tail units as fit, and one note saying how many messages were removed; a
note never replaces what costs no more than the note (then all is kept and cut
instead). The head is the task, not a promise to keep a tool unit at any price:
when what must be kept does not fit, the head's tool units may go like the
middle's (its other messages stay). When what must be kept still exceeds the
budget, the largest kept messages are cut with visible markers (any oversized
value: text, tool arguments of every shape, blocks of any kind), as many as
needed: reasoning blocks only then, whole, the task after them and system
messages last. The last unit's reasoning blocks are never cut or dropped (a
provider rejects the newest tool-use turn without its thinking block). When the
system messages alone, or what must be kept at its minimum, exceed the budget,
:class:`~langchain_context_pipeline.errors.BudgetError` says so; an entry point
that must send something all the same (the agent middleware) sends
:func:`minimal_request` instead.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.errors import BudgetError, check_int
from langchain_context_pipeline.messages.anatomy import one_pass
from langchain_context_pipeline.messages.blocks import call_ids, is_reasoning, result_ids
from langchain_context_pipeline.messages.coerce import coerce_messages
from langchain_context_pipeline.messages.marks import pipeline_kind
from langchain_context_pipeline.messages.references import message_ref
from langchain_context_pipeline.messages.trim import (
    cut_middle,
    replace_text,
    slim_blocks,
    with_cut_args,
    without_args,
)
from langchain_context_pipeline.messages.units import Split, snap_forward
from langchain_context_pipeline.stages.note import NotePricer, note_room, removal_note
from langchain_context_pipeline.stages.stats import TruncateStats
from langchain_context_pipeline.tokens.counters import message_text, resolve_token_counter
from langchain_context_pipeline.tokens.meter import Meter

__all__ = [
    "NotePricer",
    "TruncateStats",
    "hard_truncate",
    "minimal_request",
    "note_room",
    "removal_note",
    "truncate",
]

logger = logging.getLogger("langchain_context_pipeline")


def _chars_for(tokens: int, base: BaseMessage, text: str, meter: Meter) -> int:
    """Return how many chars of ``text`` hold ``tokens`` tokens, by the text's own density.

    The density is the counter's: what ``text`` adds to ``base`` over an empty text
    (dense scripts, digits and JSON cost more per char than English prose).
    """
    if not text or tokens <= 0:
        return 0
    full = meter.one(base.model_copy(update={"content": replace_text(base, text)}))
    empty = meter.one(base.model_copy(update={"content": replace_text(base, "")}))
    return math.ceil(tokens * len(text) / max(full - empty, 1))


def _shrink(message: BaseMessage, excess: int, meter: Meter, drop_reasoning: bool) -> BaseMessage:
    """Cut ``message`` until it is ``excess`` tokens smaller, or minimal.

    Tool-call arguments (every copy), then bulky blocks and the text (in the
    middle, with a marker), then, with ``drop_reasoning``, whole reasoning blocks.
    A message nothing can cut is returned itself, not as an equal copy: the output
    then keeps the caller's object, which references and fixed points rely on.
    """
    out = _cut_down(message, excess, meter, drop_reasoning)
    return message if out == message else out


def _cut_down(message: BaseMessage, excess: int, meter: Meter, drop_reasoning: bool) -> BaseMessage:
    """Do :func:`_shrink`'s cut (which may return an equal copy)."""
    target = meter.one(message) - excess
    # A cut names the original, unless the pipeline wrote the message itself.
    ref = "" if pipeline_kind(message) in ("summary", "note") else message_ref(message)
    if isinstance(message, AIMessage):
        for limit in (1024, 256, 64):
            slim = with_cut_args(message, limit, ref)[0]
            if meter.one(slim) <= target:
                return slim
        message = slim
    text = message_text(message)
    base = message
    if not isinstance(message.content, str):
        base = message.model_copy(
            update={"content": slim_blocks(message.content, drop_reasoning, ref)}
        )
    if base is not message and meter.one(base) <= target:
        return base
    # Cut by the text's own density (the marker takes the 64 chars' room).
    over = meter.one(base) - target
    keep = max(len(text) - _chars_for(over, base, text, meter) - 64, 0)
    shrunk = base
    while text:
        cut = cut_middle(text, keep * 2 // 3, keep // 3, ref)
        shrunk = base.model_copy(update={"content": replace_text(base, cut)})
        now = meter.one(shrunk)
        if keep == 0 or now <= target:
            break
        # Still over: cut again by the cut text's density (an eighth at least, so
        # the loop ends in a few rounds).
        keep = max(keep - max(_chars_for(now - target, base, cut, meter), keep // 8, 1), 0)
    if meter.one(shrunk) > meter.one(base):  # a marker longer than the text is no cut
        shrunk = base
    if meter.one(shrunk) > target and isinstance(shrunk, AIMessage):
        bare = without_args(shrunk, ref)
        if meter.one(bare) < meter.one(shrunk):  # a marker longer than the arguments is no cut
            shrunk = bare
    return shrunk


@dataclass
class _Plan:
    keep: set[int]
    shrunk: dict[int, BaseMessage]
    index_chars: int = 0


def _is_tool_unit(messages: Sequence[BaseMessage], unit: tuple[int, int]) -> bool:
    """Whether ``unit`` is a tool unit (a call and its results, or a lone result)."""
    opener = messages[unit[0]]
    return unit[1] - unit[0] > 1 or bool(call_ids(opener)) or bool(result_ids(opener))


def _select(
    messages: Sequence[BaseMessage],
    where: Split,
    budget: int,
    meter: Meter,
    first: int | None = None,
    index_chars: int | None = None,
) -> _Plan:
    n = len(messages)
    units = where.units
    h = where.head_end
    last = units[-1]

    def pinned(u: tuple[int, int]) -> bool:
        return u == last or any(i in where.systems for i in range(*u))

    mandatory = [u for u in units if u[1] <= h or pinned(u)]
    used = sum(meter.span(messages, *u) for u in mandatory)
    carried = index_chars
    index_chars, note_cost = note_room(budget, used, meter, carried)
    head_tools = [
        u for u in mandatory if u[1] <= h and not pinned(u) and _is_tool_unit(messages, u)
    ]
    if head_tools and used + note_cost > budget:
        # The head is the task, not a promise to keep a tool unit at any price: when
        # what must be kept does not fit, the head's tool units may go like the
        # middle's (oldest first), its other messages stay.
        mandatory = [u for u in mandatory if u not in head_tools]
        used = sum(meter.span(messages, *u) for u in mandatory)
        index_chars, note_cost = note_room(budget, used, meter, carried)
    keep: set[int] = {i for u in mandatory for i in range(*u)}
    used += note_cost
    priced = note_cost  # what ``used`` holds for the removal note
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
    if first is not None:
        # The given cut, if it fits: priced with the very note it leaves.
        kept = keep | {i for u in fill if u[0] >= first for i in range(*u)}
        dropped = [m for i, m in enumerate(messages) if i not in kept]
        note = meter.one(removal_note(dropped, index_chars, meter)) if dropped else 0
        total = used - note_cost + note + sum(meter.one(messages[i]) for i in kept - keep)
        if total > budget:
            first = None
        else:
            used += note - note_cost
            priced = note
    if first is None:
        # Keep as many newest units as fit, from a checkpoint on, so the dropped span
        # (and the note saying so) changes only every quarter budget.
        first = len(messages)
        room = budget - used
        for u in reversed(fill):
            cost = meter.span(messages, *u)
            if cost > room:
                break
            room -= cost
            first = u[0]
        first = snap_forward(messages, units, first, max(budget // 4, 1), meter)
    for u in fill:
        if u[0] >= first:
            keep.update(range(*u))
            used += meter.span(messages, *u)
    dropped_at = [i for i in range(n) if i not in keep]
    if dropped_at:
        # A note never replaces what costs no more than the note: then all is kept.
        note = meter.one(removal_note([messages[i] for i in dropped_at], index_chars, meter))
        gone = sum(meter.one(messages[i]) for i in dropped_at)
        if gone <= note:
            keep.update(dropped_at)
            used = meter.span(messages, 0, n)
        else:  # the note as written, not its price
            used += note - priced
    else:  # nothing dropped: no note is written, so its price is not spent
        used -= priced
    shrunk: dict[int, BaseMessage] = {}
    if used > budget:
        # What must be kept does not fit: cut the largest kept messages first, their
        # reasoning blocks only then (never the last unit's: a provider rejects the
        # newest tool-use turn without them), the task after them and system
        # messages last.
        def tier(i: int) -> int:
            return 2 if i in where.systems else 1 if i < h else 0

        order = sorted(
            (i for i in keep if i < n), key=lambda i: (tier(i), -meter.one(messages[i]), i)
        )
        passes = [(i, False) for i in order if tier(i) == 0]
        passes += [(i, i < last[0]) for i in order]
        for i, drop_reasoning in passes:
            excess = used - budget
            if excess <= 0:
                break
            current = shrunk.get(i, messages[i])
            before = meter.one(current)
            shrunk[i] = _shrink(current, excess, meter, drop_reasoning)
            used -= before - meter.one(shrunk[i])
    return _Plan(keep, shrunk, index_chars)


def _assemble(messages: Sequence[BaseMessage], plan: _Plan, meter: Meter) -> list[BaseMessage]:
    dropped = [m for i, m in enumerate(messages) if i not in plan.keep]
    out: list[BaseMessage] = []
    noted = not dropped
    for i, message in enumerate(messages):
        if i not in plan.keep:
            if not noted:
                out.append(removal_note(dropped, plan.index_chars, meter))
                noted = True
            continue
        out.append(plan.shrunk.get(i, message))
    return out


def truncate(
    messages: Sequence[BaseMessage],
    where: Split,
    threshold: int,
    meter: Meter,
    *,
    first: int | None = None,
    index_chars: int | None = None,
) -> tuple[list[BaseMessage], TruncateStats]:
    """Cut ``messages`` (split as ``where``) to at most ``threshold`` tokens by ``meter``.

    With ``first``, the units before that index are dropped (system messages and
    summaries aside) and the rest kept, even when the list fits as it is: the
    pipeline's cut, which moves only when the request would overflow (see
    ``_hysteresis``); when they do not fit, or without ``first``, as many newest
    units are kept as fit, from a checkpoint every quarter ``threshold``.
    ``index_chars``: the removal note's index size (default: by the budget, see
    :func:`note_room`); the size used is ``stats.note_index``.

    Returns the new list (a copy of the input when it already fits) and what was
    trimmed or shortened.

    Raises:
        BudgetError: when the system messages alone exceed ``threshold``, or what
            must be kept still exceeds it once cut to its minimum.
    """
    total = meter.total(messages)
    if total <= threshold and first is None:
        return list(messages), TruncateStats()
    systems = [messages[i] for i in sorted(where.systems)]
    system_tokens = meter.total(systems) if systems else 0
    if system_tokens > threshold:
        raise BudgetError(
            f"the {len(systems)} system message(s) alone take {system_tokens} tokens, over "
            f"the budget of {threshold} tokens; they are never dropped: shorten them or "
            "raise the threshold",
            required=system_tokens,
            budget=threshold,
        )
    # A counter that is not a plain sum (framing per request) is met by shrinking
    # the budget by its overhead, and again by whatever the check still finds.
    overhead = 0 if meter.additive else max(total - sum(meter.one(m) for m in messages), 0)
    budget = threshold - overhead
    out: list[BaseMessage] = list(messages)
    plan = _Plan(set(range(len(messages))), {})
    for attempt in range(8):
        plan = _select(messages, where, budget, meter, first, index_chars)
        out = _assemble(messages, plan, meter)
        excess = meter.total(out) - threshold
        if excess <= 0:
            break
        # A safety net: the removal note is held to its price by the meter, so with
        # an additive counter the first attempt fits. A counter that is not a plain
        # sum, or a note's first line dearer than the price's stand-in, can still
        # leave an excess that a budget lower by as much does not move (the same
        # plan again): the step doubles each attempt.
        budget = max(budget - (excess << attempt), 0)
        first = None  # the given cut does not fit: keep what fits instead
    else:
        required = meter.total(out)
        last = where.units[-1]
        reasoning = any(
            not isinstance(messages[i].content, str) and any(map(is_reasoning, messages[i].content))
            for i in range(*last)
        )
        kept = "the last unit, its reasoning blocks whole" if reasoning else "the last unit"
        raise BudgetError(
            f"hard truncation cannot reach the budget of {threshold} tokens: what must be "
            f"kept (head, system messages, {kept}), each cut to its minimum, still "
            f"takes {required} tokens",
            required=required,
            budget=threshold,
        )
    stats = TruncateStats(
        trimmed=len(messages) - len(plan.keep),
        shortened=len(plan.shrunk),
        note_index=plan.index_chars if len(plan.keep) < len(messages) else None,
    )
    return out, stats


def minimal_request(
    messages: Sequence[BaseMessage], where: Split, meter: Meter
) -> tuple[list[BaseMessage], TruncateStats]:
    """Return the smallest valid request: the system messages and the newest unit, cut.

    For when the budget cannot be met (the system messages alone exceed it) and
    something must be sent all the same. The system messages stay whole (they are
    never cut to make room that cannot be made); the last unit (the newest message
    with its tool calls and results, so no pair is split) is kept with every
    message of it cut to its minimum by the markers of :func:`truncate`, reasoning
    blocks kept whole (a provider rejects the newest tool-use turn without them);
    one removal note names everything else.
    """
    if not messages:
        return [], TruncateStats()
    last = where.units[-1] if where.units else (len(messages) - 1, len(messages))
    keep = set(where.systems) | set(range(*last))
    shrunk = {
        i: _shrink(messages[i], meter.one(messages[i]), meter, drop_reasoning=False)
        for i in range(*last)
        if i not in where.systems
    }
    shrunk = {i: m for i, m in shrunk.items() if m is not messages[i]}
    plan = _Plan(keep, shrunk)
    out = _assemble(messages, plan, meter)
    return out, TruncateStats(trimmed=len(messages) - len(keep), shortened=len(shrunk))


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

    Raises:
        BudgetError: when the system messages alone exceed ``threshold``.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> history = [SystemMessage("be brief"), HumanMessage("task")]
        >>> history += [HumanMessage("x" * 400) for _ in range(10)]
        >>> out = hard_truncate(history, threshold=300)
        >>> out[2].content
        '[9 earlier messages were removed to fit the context window (ref=d500d5e2).]'
    """
    check_int("threshold", threshold, 1)
    items = coerce_messages(messages)
    meter = Meter(resolve_token_counter(token_counter))
    if meter.total(items) <= threshold:
        return items
    with one_pass():  # the split and the cut read each message once
        return truncate(items, Split.of(items, head_count), threshold, meter)[0]
