"""Property tests of the invariants over what real providers send, per call and turn by turn.

Each property runs in two modes: one call over the whole conversation, and the
turn-by-turn loop of an agent (compress ``history[:k]`` for growing ``k``, carrying
``result.carried_summary`` into the next call).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_context_pipeline import (
    BudgetError,
    CarriedSummary,
    ContextPipeline,
    estimate_tokens,
)
from langchain_context_pipeline.messages.blocks import call_ids, pair_results, result_ids
from langchain_context_pipeline.messages.units import Split, group_units, head_end
from langchain_context_pipeline.tokens import estimate as _text_cost
from langchain_context_pipeline.tokens.counters import (
    MESSAGE_OVERHEAD_TOKENS,
    countable_parts,
    estimate_message_tokens,
)
from tests.support.invariants import smallest_request_tokens
from tests.support.strategies_shapes import (
    broken_pairs,
    calls_of,
    conversations,
    is_system,
    pipelines,
    reasoning_of,
)

Check = Callable[[list[BaseMessage], list[BaseMessage], ContextPipeline], None]
modes = st.sampled_from(["single", "loop"])


def _prefixes(history: list[BaseMessage]) -> list[int]:
    """Where an agent calls the model: after each unit (at most six, the last included)."""
    ends = [end for _, end in group_units(history)]
    step = max(len(ends) // 6, 1)
    return sorted({*ends[step - 1 :: step], len(history)})


def _runs(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> Iterator[tuple[list[BaseMessage], list[BaseMessage]]]:
    """Yield (input, output) of each call; a BudgetError must be deserved."""
    carried: CarriedSummary | None = None
    for k in [len(history)] if mode == "single" else _prefixes(history):
        messages = history[:k]
        try:
            result = pipeline.compress(messages, carried_summary=carried)
        except BudgetError as error:
            # Deserved only when no request within the budget exists: the system
            # messages, the task and the newest unit at their minimum do not fit.
            smallest = smallest_request_tokens(messages, pipeline.head_count)
            assert smallest > pipeline.threshold, f"over budget without cause: {error}"
            return
        carried = result.carried_summary
        yield messages, result.messages


def _run(history: list[BaseMessage], pipeline: ContextPipeline, mode: str, check: Check) -> None:
    for messages, out in _runs(history, pipeline, mode):
        check(messages, out, pipeline)


def _budget(messages: list[BaseMessage], out: list[BaseMessage], pipeline: ContextPipeline) -> None:
    tokens = estimate_tokens(out)
    assert tokens <= max(pipeline.threshold, estimate_tokens(messages)), "output grew"
    if estimate_tokens(messages) > pipeline.threshold:
        assert tokens <= pipeline.threshold
    assert out and out[-1].id == messages[-1].id, "the last message was dropped"


@given(conversations(), pipelines(), modes)
def test_budget_holds_for_every_shape(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    _run(history, pipeline, mode, _budget)


def _pairs(messages: list[BaseMessage], out: list[BaseMessage], pipeline: ContextPipeline) -> None:
    assert not broken_pairs(out), broken_pairs(out)
    for message in out:  # every copy a provider would send carries the same arguments
        for cid, copies in calls_of(message).items():
            assert all(c == copies[0] for c in copies), f"copies of call {cid} differ: {copies}"


@given(conversations(), pipelines(), modes)
def test_tool_pairs_intact_in_every_format(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    assert not broken_pairs(history)
    _run(history, pipeline, mode, _pairs)


def _systems(
    messages: list[BaseMessage], out: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    by_id = {m.id: m for m in out}
    for message in messages:
        if is_system(message):
            kept = by_id.get(message.id)
            assert kept is not None, f"system message {message.id} dropped"
            if kept.content != message.content:
                assert "chars trimmed" in str(kept.content), "a system message was rewritten"


@given(conversations(), pipelines(), modes)
def test_system_messages_kept_in_every_shape(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    _run(history, pipeline, mode, _systems)


def _reasoning(
    messages: list[BaseMessage], out: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    by_id = {m.id: m for m in messages}
    for message in out:
        source = by_id.get(message.id)
        if source is None:
            continue
        blocks = reasoning_of(source)
        kept = reasoning_of(message)
        # Byte-identical where kept: never edited, only kept whole (in order) or dropped whole.
        it = iter(blocks)
        assert all(any(b == k for b in it) for k in kept), "a reasoning block was edited"


@given(conversations(), pipelines(), modes)
def test_reasoning_blocks_never_edited(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    _run(history, pipeline, mode, _reasoning)


def _idempotent(
    messages: list[BaseMessage], out: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    if estimate_tokens(out) <= pipeline.threshold:
        again = pipeline.compress(out).messages
        assert again is out, "a second pass changed the output"


@given(conversations(), pipelines(), modes)
def test_second_pass_changes_nothing(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    _run(history, pipeline, mode, _idempotent)


@given(conversations(), pipelines(), modes)
def test_input_never_mutated_in_any_shape(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    before = pickle.dumps(history)  # pydantic's JSON refuses the deepest arguments
    for _ in _runs(history, pipeline, mode):
        pass
    assert pickle.dumps(history) == before


@given(conversations(), pipelines(), st.sampled_from([0, 1, 200]))
def test_the_smallest_request_keeps_systems_pairs_and_the_newest_turn(
    history: list[BaseMessage], pipeline: ContextPipeline, over: int
) -> None:
    """When nothing can meet the budget, ``over_budget="minimal"`` still sends a valid request.

    Everything sent beside the messages takes the whole budget (and ``over`` more).
    """
    reserved = pipeline.threshold + over
    out = pipeline.compress(history, reserved_tokens=reserved, over_budget="minimal").messages
    assert out[-1].id == history[-1].id, "the last message was dropped"
    systems = [m for m in history if is_system(m)]
    assert [m for m in out if is_system(m)] == systems
    assert all(any(k is m for k in out) for m in systems), "a system message was rewritten"
    assert not broken_pairs(out)
    _reasoning(history, out, pipeline)
    last_unit = group_units(history)[-1]
    kept_ids = {m.id for m in out}
    assert all(history[i].id in kept_ids for i in range(*last_unit)), "the newest unit was split"


@given(conversations(), st.integers(0, 8))
def test_the_head_found_without_splitting_is_the_split_head(
    history: list[BaseMessage], head_count: int
) -> None:
    # The no-op path finds the head from the first messages alone when they make no
    # tool call; it must be the head that splitting the whole list finds.
    for k in range(len(history) + 1):
        messages = history[:k]
        assert head_end(messages, head_count) == Split.of(messages, head_count).head_end


@given(conversations())
def test_every_message_costs_what_its_countable_parts_cost(history: list[BaseMessage]) -> None:
    # The estimate's shortcuts (string content, tool calls from a memo) give what
    # counting each countable part afresh gives, first time, from the memos, and
    # after an in-place edit of a call's arguments.
    def by_parts(message: BaseMessage) -> int:
        texts, fixed = countable_parts(message)
        return sum(_text_cost._estimate(t) for t in texts if t) + fixed + MESSAGE_OVERHEAD_TOKENS

    for _ in range(2):
        for message in history:
            assert estimate_message_tokens(message) == by_parts(message)
    for message in history:
        for call in getattr(message, "tool_calls", []):
            if isinstance(call["args"], dict):
                call["args"]["added"] = True
                assert estimate_message_tokens(message) == by_parts(message)


@given(conversations())
def test_pairing_reads_every_message_as_its_call_and_result_ids_say(
    history: list[BaseMessage],
) -> None:
    # pair_results reads ToolMessages and AIMessages directly; it must pair as the
    # general readers of call and result ids would, in every format.
    open_calls: dict[str, list[int]] = {}
    last_call: dict[str, int] = {}
    expected: dict[int, list[int]] = {}
    for index, message in enumerate(history):
        for cid in result_ids(message):
            stack = open_calls.get(cid)
            start = stack.pop() if stack else last_call.get(cid)
            if start is not None:
                expected.setdefault(index, []).append(start)
        for cid in call_ids(message):
            open_calls.setdefault(cid, []).append(index)
            last_call[cid] = index
    assert pair_results(history) == expected
