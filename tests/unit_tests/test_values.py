"""Arbitrary Python values in messages: every reader reads them alike, at any depth.

Sets, bytes, datetimes, Decimals, NaN, tuple keys and int keys mixed with strings,
dataclasses, pydantic models and deep nesting, in tool-call arguments and in tool
results, through the estimate, references, the Pruner and its memo, recall and the
archive; and thread ids a store cannot take as one namespace label.
"""

from __future__ import annotations

import copy
import datetime
import json
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel

from langchain_context_pipeline import ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.integrations import archive as archive
from langchain_context_pipeline.messages import references
from langchain_context_pipeline.messages.references import message_ref
from langchain_context_pipeline.messages.snapshot import snapshot
from langchain_context_pipeline.messages.values import dumps, jsonable
from langchain_context_pipeline.recall import archive_originals, create_recall_tool
from tests.support.strategies_shapes import python_values


@dataclass
class Query:
    terms: list[str] = field(default_factory=lambda: ["alpha"])


class Filter(BaseModel):
    words: list[str] = ["alpha"]


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


def unit(args: dict[str, Any], output: str = "x" * 3_000, n: int = 1) -> list[BaseMessage]:
    call = {"name": "x", "args": args, "id": f"c{n}", "type": "tool_call"}
    return [
        AIMessage("", tool_calls=[call], id=f"a{n}"),
        ToolMessage(output, tool_call_id=f"c{n}", id=f"t{n}"),
    ]


def history(args: dict[str, Any]) -> list[BaseMessage]:
    return [HumanMessage("task", id="task"), *unit(args), HumanMessage("next " * 50, id="h")]


# -- item 2: the Pruner's memo sees an edit inside any value ----------------------------


def _edit_set(args: dict[str, Any]) -> None:
    args["value"].add("!edited")


def _edit_dataclass(args: dict[str, Any]) -> None:
    args["value"].terms.insert(0, "edited")


def _edit_model(args: dict[str, Any]) -> None:
    args["value"].words.insert(0, "edited")


@pytest.mark.parametrize(
    ("value", "edit"),
    [({"alpha", "beta"}, _edit_set), (Query(), _edit_dataclass), (Filter(), _edit_model)],
    ids=["set", "dataclass", "pydantic"],
)
def test_an_edit_inside_an_argument_is_seen_by_the_memo(value: Any, edit: Any) -> None:
    messages = history({"value": value})
    pruner = Pruner(tail_budget=0, tool_output_limit=100)
    first = pruner.invoke(messages)
    assert "alpha" in str(first[2].content)  # the brief shows the argument
    edit(messages[1].tool_calls[0]["args"])
    again, fresh = pruner.invoke(messages), Pruner(tail_budget=0, tool_output_limit=100)
    expected = fresh.invoke(messages)
    assert again[2].content == expected[2].content
    assert "edited" in str(again[2].content)


def test_snapshots_see_inside_sets_dataclasses_models_and_any_depth() -> None:
    values: list[Any] = [{"s": {"a"}}, {"d": Query()}, {"m": Filter()}, deep(3_000)]
    for value in values:
        assert snapshot(value) == snapshot(value)
    before = snapshot(values)
    values[0]["s"].add("b")
    assert snapshot(values) != before
    before = snapshot(values)
    inner = values[3]
    for _ in range(2_000):  # an edit two thousand levels down
        inner = inner["a"] if isinstance(inner, dict) else inner[0]
    inner[0 if isinstance(inner, list) else "a"] = "edited"
    assert snapshot(values) != before
    loop: list[Any] = [1]
    loop.append(loop)
    assert snapshot(loop) == snapshot(loop)


# -- item 5: keys that are not strings ---------------------------------------------------

ODD_KEYS: list[dict[str, Any]] = [
    {"rows": {(1, 2): "a", (3, 4): "b"}},
    {"rows": {1: "a", "b": 2, None: 3, 2.5: 4}},
]


@pytest.mark.parametrize("args", ODD_KEYS, ids=["tuple-keys", "mixed-keys"])
def test_non_string_keys_are_counted_and_referenced(args: dict[str, Any]) -> None:
    ai = AIMessage("", tool_calls=[{"name": "x", "args": args, "id": "c1"}])  # no id
    assert estimate_tokens([ai]) > estimate_tokens([AIMessage("")])
    assert message_ref(ai) == message_ref(ai.model_copy(deep=True))
    out = ContextPipeline(threshold=300, tool_args_limit=5).compress(
        [HumanMessage("task"), ai, ToolMessage("ok " * 400, tool_call_id="c1"), HumanMessage("go")]
    )
    assert out.messages[-1].content == "go"


def test_values_are_written_as_json_writes_them_and_the_rest_canonically() -> None:
    plain = {"a": [1, 2.5, None, True, "é"], "b": {"c": float("nan")}, 3: "int key"}
    assert dumps(plain) == json.dumps(plain, ensure_ascii=False)
    assert dumps(plain, sort_keys=False) == dumps(dict(plain))
    mixed = {"b": 1, 2: {3, 1}, (1, 2): b"x"}
    assert dumps(mixed, sort_keys=True) == '{"(1, 2)": "b\'x\'", "2": [1, 3], "b": 1}'
    strings = {"zeta", "alpha", "mu"}
    assert dumps(strings) == '["alpha", "mu", "zeta"]'  # in every process


# -- item 6: deep values outside tool-call arguments ----------------------------------


def test_a_deep_part_of_a_tool_result_block_is_sized_without_recursion() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("task", id="task"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c1"}], id="a1"),
        HumanMessage(
            [{"type": "tool_result", "tool_use_id": "c1", "content": [deep(1_000)]}], id="r1"
        ),
        HumanMessage("next " * 100, id="h"),
    ]
    pruned = Pruner(tail_budget=0, tool_output_limit=10).invoke(messages)
    assert pruned[2].content[0]["content"].startswith("[x]")  # type: ignore[index]
    assert ContextPipeline(threshold=300).compress(messages).messages[-1].id == "h"


def test_originals_of_any_depth_are_archived_and_json_safe() -> None:
    messages = [
        HumanMessage("task", id="task"),
        *unit({"tree": deep(1_000)}),
        HumanMessage("more " * 3_000, id="h2"),
        AIMessage("ok", id="a3"),
        HumanMessage("go", id="h4"),
    ]
    result = ContextPipeline(threshold=800).compress(messages)
    store = InMemoryStore()
    archived = archive_originals(store, "t", messages, result)
    assert archived.report.archive_failures == 0
    item = store.get(archive.namespace("t"), message_ref(messages[1]))
    assert item is not None
    # What a JSON store (Postgres) writes and parses back, at its own depth limits.
    assert json.loads(json.dumps(item.value)) == item.value


# -- item 7: recall answers with text for every value ----------------------------------


def recall(ref: str, state: list[BaseMessage], store: Any = None, thread: str = "t") -> str:
    """Call the recall tool as an agent's tool node does."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([create_recall_tool()]))
    graph.add_edge(START, "tools")
    call = {"name": "recall", "args": {"ref": ref}, "id": "r1", "type": "tool_call"}
    config: Any = {"configurable": {"thread_id": thread}}
    messages = [*state, AIMessage("", tool_calls=[call], id="ask")]
    out = graph.compile(store=store).invoke({"messages": messages}, config)
    return str(out["messages"][-1].content)


ODD_ARGS: list[dict[str, Any]] = [
    {"tags": {"b", "a"}},
    {"blob": b"\x00raw"},
    {"when": datetime.datetime(2024, 5, 1, 12, 0)},
    {"amount": Decimal("1.10"), "ratio": float("inf")},
    {"tree": deep(1_500)},
    {"query": Query(), "filter": Filter()},
]


@pytest.mark.parametrize("args", ODD_ARGS, ids=lambda a: next(iter(a)))
def test_recall_reads_back_any_arguments_from_state_and_from_the_archive(
    args: dict[str, Any],
) -> None:
    messages = history(args)
    ref = message_ref(messages[1])
    page = recall(ref, messages)
    assert "[tool calls]" in page and dumps(args)[:200] in page
    # Persist mode: state holds what the pass left, the store the original. Pruning
    # fits this history: the result is briefed (the call stays), and its record in the
    # store holds the call it answers, arguments and all.
    store = InMemoryStore()
    result = ContextPipeline(threshold=200, tail_budget=0).compress(messages)
    assert result.messages[2] is not messages[2]  # the result was briefed
    archive_originals(store, "t", messages, result)
    briefed = message_ref(messages[2])
    record = archive.read_record(store, "t", briefed)
    assert record is not None
    assert dumps(jsonable(args))[:200] in recall(briefed, [], store)  # as the store keeps it


# -- item 10: archiving is linear in the history and the references ---------------------


def test_forged_references_cost_no_pass_over_the_history(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = references.message_ref

    def counting(message: BaseMessage) -> str:
        calls["n"] += 1
        return real(message)

    monkeypatch.setattr(references, "message_ref", counting)
    monkeypatch.setattr(archive, "message_ref", counting, raising=False)
    before: list[BaseMessage] = [HumanMessage("task", id="task")]
    for n in range(200):
        before += unit({"path": f"f{n}.py"}, "x" * 40, n)
    rnd = random.Random(0)

    def planned(forged: int) -> tuple[int, int]:
        refs = [f"ref={rnd.getrandbits(32):08x}" for _ in range(forged)]
        real_refs = [real(m) for m in before[1:]]
        spans = [f"ref={a}..{real_refs[-1]}" for a in real_refs[: forged // 3]]
        after = [ToolMessage(" ".join(refs + spans), tool_call_id="c1", id="new")]
        calls["n"] = 0
        records = archive.plan_records(before, after)
        return calls["n"], len(records)

    few, many = planned(10), planned(1_000)
    # Each reference is resolved from one index of the history: the references
    # add no pass over it (the old resolution hashed the history once per reference).
    assert many[0] <= few[0] + 1_000
    # Spans written in a tool's output are not the pipeline's: none is archived.
    assert many[1] == few[1] == 0


# -- item 14: every thread id round-trips -----------------------------------------------

THREADS = ["user@example.com", "session.42", ".", "a.b", "a%2Eb", "50%", "nul\x00id", "plain-7"]


def test_every_thread_id_has_a_namespace_of_its_own_that_stores_accept() -> None:
    spaces = [archive.namespace(t) for t in THREADS]
    assert len(set(spaces)) == len(THREADS)
    for space in spaces:
        assert all(label and "." not in label and "\x00" not in label for label in space)
        InMemoryStore().get(space, "k")  # BaseStore.get validates every label
    # Ids a store always took keep their archives where they were written.
    assert archive.namespace("plain-7") == ("context_pipeline_originals", "plain-7")


@pytest.mark.parametrize("thread", THREADS)
def test_originals_of_a_thread_with_any_id_are_recalled(thread: str) -> None:
    messages = history({"path": "src/app.py"})
    store = InMemoryStore()
    result = ContextPipeline(threshold=200, tail_budget=0).compress(messages)
    assert "x" * 3_000 not in str(result.messages[2].content)
    archived = archive_originals(store, thread, messages, result)
    assert archived.report.archive_failures == 0
    page = recall(message_ref(messages[2]), list(archived.messages), store, thread)
    assert "x" * 1_000 in page, page
    assert "x" * 1_000 not in recall(message_ref(messages[2]), [], store, thread + "-other")


def test_a_json_safe_copy_keeps_every_entry() -> None:
    value = {1: "int", "1": "str", (1,): {2, 1}, "f": float("nan"), "n": 10**30}
    copy = jsonable(value)
    assert copy == {"1": "int", "1#1": "str", "(1,)": [1, 2], "f": "NaN", "n": str(10**30)}


# -- every reader, any value, any depth: a property ----------------------------------


@settings(max_examples=20)
@given(python_values(max_depth=3_000), python_values(max_depth=3_000), st.integers(200, 3_000))
def test_any_value_anywhere_is_counted_pruned_archived_and_recalled(
    args: Any, part: Any, threshold: int
) -> None:
    # Deeper than the interpreter's recursion limit (Hypothesis raises it to 2,048).
    call = {"name": "lookup", "args": {"value": args}, "id": "c1", "type": "tool_call"}
    result_block = {"type": "tool_result", "tool_use_id": "c2", "content": [part, "y" * 900]}
    messages: list[BaseMessage] = [
        HumanMessage("task", id="task"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("x" * 5_000, tool_call_id="c1", id="t1"),
        AIMessage("", tool_calls=[{**call, "id": "c2"}], id="a2"),
        HumanMessage([result_block], id="r2"),
        HumanMessage("next " * 200, id="h"),
    ]
    pipeline = ContextPipeline(threshold=threshold, tail_budget=0, tool_output_limit=200)
    result = pipeline.compress(messages)
    assert result.messages[-1].id == "h"
    if estimate_tokens(messages) > threshold and not result.report.over_budget:
        assert estimate_tokens(result.messages) <= threshold
    store = InMemoryStore()
    archived = archive_originals(store, "user@example.com", messages, result)
    assert archived.report.archive_failures == 0
    for message in messages:
        assert recall(message_ref(message), messages).startswith("[recall ref=")


def test_prefix_digests_and_tool_counts_read_any_value_alike_in_every_copy() -> None:
    """The calibration's prefix digest and the tool-schema count read values as the rest does.

    Mixed keys once made ``json.dumps(sort_keys=True)`` raise, and a set's ``repr`` order
    changes between processes; both now go through the one value reader.
    """
    from langchain_core.messages import AIMessage

    from langchain_context_pipeline.integrations.tool_fingerprint import tools_fingerprint
    from langchain_context_pipeline.tokens.calibration import tools_tokens
    from langchain_context_pipeline.tokens.counters import estimate_tokens
    from langchain_context_pipeline.tokens.prefix import prefix_digests, stable_text

    args = {"k": {1: "a", "b": 2, (3, 4): {"x", "y"}}}
    first = AIMessage("", tool_calls=[{"name": "t", "args": args, "id": "c1"}])
    again = AIMessage("", tool_calls=[{"name": "t", "args": copy.deepcopy(args), "id": "c1"}])
    assert prefix_digests("seed", [first]) == prefix_digests("seed", [again])
    assert stable_text({"s": {"b", "a"}}) == stable_text({"s": {"a", "b"}})
    schema = {"name": "t", "parameters": {1: "one", "two": 2}}
    assert tools_tokens(estimate_tokens, [schema]) > 0
    assert tools_fingerprint([schema]) == tools_fingerprint([copy.deepcopy(schema)])


def test_a_deep_list_inside_a_tool_result_block_is_counted_without_recursion() -> None:
    """A bare list part (not a block) of a result's content is read by the value reader."""
    block = {"type": "tool_result", "tool_use_id": "c1", "content": [[deep(3_000)], "y" * 10]}
    message = HumanMessage([block], id="r1")
    assert estimate_tokens([message]) > 3_000  # every bracket is sent
