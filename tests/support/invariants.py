"""Checks of the pipeline's invariants, shared by property, transcript and agent tests."""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from langchain_context_pipeline.tokens.counters import message_text


def call_ids(message: BaseMessage) -> list[str]:
    if not isinstance(message, AIMessage):
        return []
    ids = [c.get("id") for c in message.tool_calls]
    ids += [c.get("id") for c in message.invalid_tool_calls]
    return [i for i in ids if i]


def orphans(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool-call ids of ToolMessages with no earlier AIMessage calling them."""
    seen: set[str] = set()
    bad: list[str] = []
    for m in messages:
        seen.update(call_ids(m))
        if isinstance(m, ToolMessage) and m.tool_call_id not in seen:
            bad.append(m.tool_call_id)
    return bad


def unanswered(messages: Sequence[BaseMessage]) -> list[str]:
    """Ids of tool calls with no ToolMessage answering them later."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [cid for m in messages for cid in call_ids(m) if cid not in answered]


def assert_pairs_kept(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> None:
    """The output creates no orphan and no unanswered call that the input did not have."""
    new_orphans = set(orphans(after)) - set(orphans(before))
    new_unanswered = set(unanswered(after)) - set(unanswered(before))
    assert not new_orphans, f"orphan tool results created: {sorted(new_orphans)}"
    assert not new_unanswered, f"calls left unanswered: {sorted(new_unanswered)}"


def assert_systems_kept(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> None:
    """Every system message is still there, in order (cut in the middle only if over budget)."""
    systems_before = [m for m in before if isinstance(m, SystemMessage)]
    systems_after = [m for m in after if isinstance(m, SystemMessage)]
    assert len(systems_after) == len(systems_before), "a system message was dropped"
    for b, a in zip(systems_before, systems_after, strict=True):
        assert a.id == b.id
        if message_text(a) != message_text(b):
            assert "chars trimmed" in message_text(a), "a system message was rewritten"


def assert_last_kept(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> None:
    if before:
        last = before[-1]
        assert after, "the output is empty"
        assert after[-1].type == last.type
        assert after[-1].id == last.id


def snapshot(messages: Sequence[BaseMessage]) -> list[Any]:
    """An exact picture of messages, to prove they were not mutated.

    A deep copy of every field with its type (not JSON: pydantic refuses to
    serialise arguments nested a few hundred levels deep, which agents can send).
    """
    return [(type(m), deepcopy(dict(m))) for m in messages]


def smallest_request_tokens(messages: Sequence[BaseMessage], head_count: int) -> int:
    """Tokens (by the default estimate) of the smallest request truncation may send.

    The system messages whole, the head's other messages that are not tool units
    (the task) and the newest unit each cut to its minimum (the newest unit's
    reasoning blocks whole, as a provider requires), and one removal note: when this
    fits the threshold, a request within it exists and ``compress`` must not raise.
    """
    from langchain_context_pipeline.messages.marks import pipeline_kind
    from langchain_context_pipeline.messages.units import Split
    from langchain_context_pipeline.stages.truncate import _shrink, minimal_request, removal_note
    from langchain_context_pipeline.tokens.counters import estimate_tokens
    from langchain_context_pipeline.tokens.meter import Meter

    if not messages:
        return 0
    meter = Meter(estimate_tokens)
    where = Split.of(messages, head_count)
    smallest = minimal_request(messages, where, meter)[0]
    tokens = sum(meter.one(m) for m in smallest if pipeline_kind(m) != "note")
    last = where.units[-1]
    kept = set(where.systems) | set(range(*last))
    for start, end in where.units:
        task = end - start == 1 and not call_ids(messages[start])
        if end <= where.head_end and (start, end) != last and task and start not in where.systems:
            m = messages[start]
            tokens += meter.one(_shrink(m, meter.one(m), meter, drop_reasoning=True))
            kept.add(start)
    # The note names what it replaces: its size follows what goes (the task stays).
    dropped = [m for i, m in enumerate(messages) if i not in kept]
    return tokens + (meter.one(removal_note(dropped)) if dropped else 0)
