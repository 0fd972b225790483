"""The memos' fast check (``marshal`` bytes of a plain value) is as exact as a snapshot.

A memo stores ``state(value)`` and checks ``unchanged(value, state)``; a plain value is
checked by its ``marshal`` bytes. These tests hold it to the snapshot's contract (equal
exactly when written alike), also for the values ``marshal`` writes alike (``bytes``
and ``bytearray``) or refuses (subclasses), and hold the Pruner to invariant 4: after
any in-place edit, a warm Pruner gives what a fresh one gives.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_pipeline import Pruner
from langchain_context_pipeline.messages.snapshot import (
    message_state,
    message_unchanged,
    snapshot,
    state,
    unchanged,
)
from tests.support.written import PLAIN_LEAVES, nested, typed


class Text(str):
    pass


class Number(enum.IntEnum):
    ONE = 1


leaves = st.sampled_from([*PLAIN_LEAVES, Text("a"), Number.ONE]) | st.builds(
    bytearray, st.sampled_from([b"a", b""])
)
values = nested(leaves)


@given(values, values)
@example(1, True)
@example(0.0, -0.0)
@example(b"a", bytearray(b"a"))
@example(["a"], [Text("a")])
@example({"a": 1}, {"a": Number.ONE})
@example({"a": 1, "b": 2}, {"b": 2, "a": 1})
@example({"a": [1]}, {"a": (1,)})
@example({1: "a"}, {"1": "a"})
def test_unchanged_holds_exactly_when_the_values_are_written_alike(x: Any, y: Any) -> None:
    assert unchanged(y, state(x)) == (typed(x) == typed(y))
    assert unchanged(y, state(x)) == (snapshot(x) == snapshot(y))


@given(values)
def test_a_value_is_unchanged_against_its_own_state(x: Any) -> None:
    import copy

    assert unchanged(x, state(x))
    assert unchanged(copy.deepcopy(x), state(x))


def test_plain_values_take_the_fast_check_and_others_the_snapshot() -> None:
    assert type(state({"a": [1, 2.5, None, True, ("b",)]})).__name__ == "_Packed"
    for other in ({"a": b"x"}, {"a": {1, 2}}, {"a": Text("x")}, {("a",): 1}):
        assert state(other) == snapshot(other)
    deep: Any = "x"
    for _ in range(150):
        deep = [deep]
    assert state(deep) == snapshot(deep)
    cycle: list[Any] = []
    cycle.append(cycle)
    assert unchanged(cycle, state(cycle))


def test_a_message_state_sees_every_field_and_the_extra_values() -> None:
    message = AIMessage("hi", tool_calls=[{"name": "f", "args": {"n": 1}, "id": "c"}])
    old = message_state(message, ("f", {"n": 1}))
    assert message_unchanged(message, old, ("f", {"n": 1}))
    assert not message_unchanged(message, old, ("f", {"n": True}))
    message.tool_calls[0]["args"]["n"] = 1.0
    assert not message_unchanged(message, old, ("f", {"n": 1}))
    assert not message_unchanged(HumanMessage("hi"), old, ("f", {"n": 1}))


def test_a_message_state_names_the_class() -> None:
    class Other(HumanMessage):
        pass

    first, second = HumanMessage("hi", id="m"), Other("hi", id="m")
    assert first.__dict__ == second.__dict__
    assert message_unchanged(first, message_state(first))
    assert message_unchanged(second, message_state(second))
    assert not message_unchanged(second, message_state(first))
    assert not message_unchanged(first, message_state(second))
    assert isinstance(message_state(first), bytes)  # plain: bare bytes, nothing tracked


# -- invariant 4 through the Pruner -----------------------------------------------------


def history() -> list[BaseMessage]:
    call = {"name": "bash", "args": {"command": "ls " * 200, "n": 1}, "id": "c1"}
    block_call = {"type": "tool_use", "id": "c2", "name": "read", "input": {"path": "a.py"}}
    return [
        HumanMessage("task", id="h"),
        AIMessage("thinking " * 200, tool_calls=[call], id="a1"),
        ToolMessage([{"type": "text", "text": "out\n" * 400}], tool_call_id="c1", id="t1"),
        AIMessage([{"type": "text", "text": "more " * 300}, block_call], id="a2"),
        HumanMessage(
            [{"type": "tool_result", "tool_use_id": "c2", "content": "x" * 3000}], id="r2"
        ),
        HumanMessage("thanks", id="end"),
    ]


def _edit(messages: list[BaseMessage], which: int, value: Any) -> None:
    """Edit one nested place in place (the value may be written alike under ==)."""
    m: list[Any] = messages
    places: list[Callable[[], object]] = [
        lambda: m[1].tool_calls[0]["args"].__setitem__("n", value),
        lambda: m[1].tool_calls[0]["args"].__setitem__("extra", value),
        lambda: m[2].content[0].__setitem__("text", value),
        lambda: m[3].content[1]["input"].__setitem__("path", value),
        lambda: m[3].content.append({"type": "text", "text": value}),
        lambda: m[4].content[0].__setitem__("content", value),
        lambda: m[2].response_metadata.__setitem__("k", value),
        lambda: setattr(m[2], "name", value if isinstance(value, str) else "shell"),
    ]
    places[which % len(places)]()


def _written(messages: list[BaseMessage]) -> str:
    return repr([(type(m), m.__dict__) for m in messages])


edits = st.lists(
    st.tuples(
        st.integers(0, 7),
        st.sampled_from([1, True, 1.0, -0.0, 0.0, "a.py", Text("a.py"), b"x", "y" * 3000])
        | st.builds(bytearray, st.just(b"x"))
        | st.builds(set, st.just({"a", "b"})),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(edits)
def test_after_in_place_edits_a_warm_pruner_gives_what_a_fresh_one_gives(
    changes: list[tuple[int, Any]],
) -> None:
    messages = history()
    pruner = Pruner(tail_budget=5)
    pruner.invoke(messages)
    pruner.invoke(messages)  # warm: every result from the memo
    for which, value in changes:
        _edit(messages, which, value)
        assert _written(pruner.invoke(messages)) == _written(Pruner(tail_budget=5).invoke(messages))
