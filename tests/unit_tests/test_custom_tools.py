"""OpenAI free-form ("custom") tools: a ``custom_tool_call`` block answered by a custom output.

langchain-openai keeps a custom call as a content block of the AIMessage (whose
``input`` is one free-form string) and lists it in ``tool_calls`` as
``{"__arg1": input}``; a ``custom_tool`` returns ``[{"type": "custom_tool_call_output",
"output": ...}]`` as the ``ToolMessage``'s content, and only a ``ToolMessage`` holding
that block is sent as the custom call's output. So the output's text is the block's
``output``, a brief keeps the block, and both copies of the input are cut alike.
"""

from __future__ import annotations

from typing import Any

import pytest
import quicktok
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai.chat_models.base import _construct_responses_api_input

from langchain_context_pipeline import DIGEST, ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.messages.blocks import call_index, pair_results
from langchain_context_pipeline.tokens.counters import message_text
from tests.support.strategies_shapes import broken_pairs, calls_of

CL100K = quicktok.get_encoding("cl100k_base")


def patch(i: int, lines: int = 60) -> str:
    return f"*** Begin Patch\n*** Update File: src/mod_{i}.py\n" + "+    y = f(x)\n" * lines


def custom_call(i: int, text: str) -> AIMessage:
    block = {"type": "custom_tool_call", "id": f"ctc_{i:040x}", "call_id": f"call_{i}"}
    block |= {"name": "apply_patch", "input": text, "status": "completed"}
    listed = {"type": "tool_call", "name": "apply_patch", "args": {"__arg1": text}}
    return AIMessage([block], tool_calls=[{**listed, "id": f"call_{i}"}], id=f"a{i}")


def custom_output(i: int, text: str) -> ToolMessage:
    block = {"type": "custom_tool_call_output", "output": text}
    return ToolMessage([block], tool_call_id=f"call_{i}", id=f"r{i}")


def session(steps: int = 8) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("sys", id="s"), HumanMessage("Fix it.", id="t")]
    for i in range(steps):
        messages += [custom_call(i, patch(i)), custom_output(i, f"applied {i}\n" + "ok\n" * 400)]
    return [*messages, HumanMessage("go on", id="last")]


def _outputs_keep_their_form(out: list[BaseMessage]) -> None:
    for message in out:
        if isinstance(message, ToolMessage):
            assert isinstance(message.content, list), "a custom output became plain text"
            assert [b["type"] for b in message.content] == ["custom_tool_call_output"]


def test_a_custom_output_answers_its_call_and_reads_as_text() -> None:
    messages = [custom_call(0, "echo hi"), custom_output(0, "hi")]
    assert pair_results(messages) == {1: [0]}
    assert call_index(messages[0]) == {"call_0": ("apply_patch", {"__arg1": "echo hi"})}
    assert message_text(messages[1]) == "hi"


def test_the_pruner_briefs_a_custom_output_inside_its_block() -> None:
    messages = [HumanMessage("task"), custom_call(0, patch(0)), custom_output(0, "ok\n" * 900)]
    messages += [AIMessage("later " * 2_000), HumanMessage("go on")]
    out = Pruner(tail_budget=50).invoke(messages)
    (block,) = out[2].content
    assert block["type"] == "custom_tool_call_output"
    assert block["output"].startswith("[apply_patch]") and len(block["output"]) <= 500
    # Both copies of the free-form input are cut, to the same text.
    (call_block,) = out[1].content
    assert len(call_block["input"]) <= 200 < len(patch(0))
    assert out[1].tool_calls[0]["args"] == {"__arg1": call_block["input"]}
    assert messages[2].content[0]["output"] == "ok\n" * 900  # the input is not mutated


def test_pruning_brings_it_under_before_any_turn_is_dropped() -> None:
    messages = session()
    result = ContextPipeline(threshold=9_000, tail_budget=1_000).compress(messages)
    assert estimate_tokens(messages) > 9_000
    assert result.report.stages == ["prune"]
    assert [m.id for m in result.messages] == [m.id for m in messages]
    _outputs_keep_their_form(result.messages)


@pytest.mark.parametrize("threshold", [1_500, 3_000, 6_000, 12_000])
@pytest.mark.parametrize("model", [None, DIGEST])
def test_compression_keeps_pairs_and_the_outputs_form(threshold: int, model: object) -> None:
    out = ContextPipeline(threshold=threshold, model=model).compress(session()).messages
    assert broken_pairs(out) == []
    assert estimate_tokens(out) <= threshold
    _outputs_keep_their_form(out)
    for message in out:
        for cid, copies in calls_of(message).items():
            assert all(c == copies[0] for c in copies), f"copies of {cid} differ"


def _sent_tokens(messages: list[BaseMessage]) -> int:
    """cl100k tokens of every string langchain-openai's Responses input holds."""

    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return []

    items = _construct_responses_api_input(messages)
    return sum(len(CL100K.encode(s)) for item in items for s in strings(item))


@given(
    st.lists(
        st.tuples(
            st.text(st.characters(codec="utf-8"), max_size=400),
            st.text(st.characters(codec="utf-8"), max_size=400),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_estimate_covers_what_is_sent(turns: list[tuple[str, str]]) -> None:
    messages: list[BaseMessage] = [HumanMessage("task")]
    for i, (text, output) in enumerate(turns):
        messages += [custom_call(i, text), custom_output(i, output)]
    assert estimate_tokens(messages) >= _sent_tokens(messages)


@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=300), min_size=1, max_size=4))
def test_a_listed_function_call_block_is_covered_with_its_item_id(outputs: list[str]) -> None:
    """A Responses ``function_call`` block that repeats a ``tool_calls`` entry is sent with
    its own item ``id``: counted beside the call the entry counts."""
    messages: list[BaseMessage] = [HumanMessage("task")]
    for i, output in enumerate(outputs):
        block = {"type": "function_call", "id": f"fc_{i:048x}", "call_id": f"call_{i}"}
        block |= {"name": "read_file", "arguments": '{"path": "a.py"}', "status": "completed"}
        listed = {"name": "read_file", "args": {"path": "a.py"}, "id": f"call_{i}"}
        messages += [
            AIMessage([block], tool_calls=[listed]),
            ToolMessage(output, tool_call_id=f"call_{i}"),
        ]
    assert estimate_tokens(messages) >= _sent_tokens(messages)
