"""Responses built-in items kept as content blocks: apply_patch, MCP approvals, tool search.

langchain-openai keeps an ``apply_patch_call``, an ``mcp_approval_request`` and a
``tool_search_call`` as content blocks of the AIMessage (never in ``tool_calls``) and
sends them back as they are; the user answers each with a block of a later message
(``apply_patch_call_output``, ``mcp_approval_response``, ``tool_search_output``), which
langchain-openai sends as its own input item. The Responses API refuses an answer
whose call it cannot find, so each is paired with its call, kept or dropped with it,
and an ``apply_patch_call_output`` keeps its ``status`` (required) when it is cut.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai.chat_models.base import _construct_responses_api_input

from langchain_context_pipeline import DIGEST, ContextPipeline, Pruner
from langchain_context_pipeline.messages.blocks import call_index, pair_results
from langchain_context_pipeline.messages.trim import slim_blocks
from langchain_context_pipeline.messages.units import group_units
from tests.support.strategies_shapes import broken_pairs

ANSWERS = {
    "apply_patch_call_output": "call_id",
    "mcp_approval_response": "approval_request_id",
    "tool_search_output": "call_id",
}
CALLS = {"apply_patch_call": "call_id", "mcp_approval_request": "id", "tool_search_call": "call_id"}


def patch_call(i: int, lines: int = 80) -> AIMessage:
    operation = {"type": "update_file", "path": f"src/mod_{i}.py", "diff": "+ y = f(x)\n" * lines}
    block = {"type": "apply_patch_call", "id": f"apc_{i}", "call_id": f"call_{i}"}
    return AIMessage([block | {"status": "completed", "operation": operation}], id=f"a{i}")


def patch_output(i: int, text: str) -> HumanMessage:
    block = {"type": "apply_patch_call_output", "call_id": f"call_{i}", "status": "completed"}
    return HumanMessage([block | {"output": text}], id=f"r{i}")


def approval_request(i: int) -> AIMessage:
    block = {"type": "mcp_approval_request", "id": f"mcpr_{i}", "name": "delete_file"}
    block |= {"arguments": json.dumps({"path": f"src/mod_{i}.py"}), "server_label": "files"}
    return AIMessage([block], id=f"q{i}")


def approval(i: int) -> HumanMessage:
    block = {"type": "mcp_approval_response", "approval_request_id": f"mcpr_{i}", "approve": True}
    return HumanMessage([block], id=f"v{i}")


def search_call(i: int) -> AIMessage:
    block = {"type": "tool_search_call", "id": f"ts_{i}", "call_id": f"tsc_{i}"}
    block |= {"execution": "client", "arguments": {"query": "files"}, "status": "completed"}
    return AIMessage([block], id=f"s{i}")


def search_output(i: int) -> HumanMessage:
    tools = [{"type": "function", "name": f"tool_{k}", "parameters": {}} for k in range(40)]
    block = {"type": "tool_search_output", "call_id": f"tsc_{i}", "tools": tools}
    return HumanMessage([block | {"execution": "client", "status": "completed"}], id=f"o{i}")


def session(steps: int = 6) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("sys", id="sys"), HumanMessage("Fix it.", id="t")]
    for i in range(steps):
        messages += [search_call(i), search_output(i)]
        messages += [patch_call(i), patch_output(i, f"applied {i}\n" + "ok\n" * 500)]
        messages += [approval_request(i), approval(i)]
    return [*messages, HumanMessage("go on", id="last")]


def orphans(messages: list[BaseMessage]) -> list[str]:
    """Answers with no call before them in the Responses input langchain-openai sends."""
    seen: set[str] = set()
    problems: list[str] = []
    for item in _construct_responses_api_input(messages):
        kind = item.get("type")
        if kind in CALLS:
            seen.add(item[CALLS[kind]])
        elif kind in ANSWERS and item[ANSWERS[kind]] not in seen:
            problems.append(f"{kind} {item[ANSWERS[kind]]}")
    return problems


def test_each_answer_is_paired_with_its_call_and_in_its_unit() -> None:
    messages = [HumanMessage("t"), search_call(0), search_output(0), patch_call(0)]
    messages += [patch_output(0, "ok"), approval_request(0), approval(0)]
    assert pair_results(messages) == {2: [1], 4: [3], 6: [5]}
    assert group_units(messages) == [(0, 1), (1, 3), (3, 5), (5, 7)]
    assert call_index(messages[3])["call_0"][0] == "apply_patch"
    assert call_index(messages[5])["mcpr_0"] == ("delete_file", {"path": "src/mod_0.py"})


def test_the_pruner_briefs_a_patch_output_in_its_block_and_cuts_the_diff() -> None:
    messages = session(2)
    out = Pruner(tail_budget=50).invoke(messages)
    (block,) = out[5].content
    assert block["type"] == "apply_patch_call_output" and block["status"] == "completed"
    assert block["call_id"] == "call_0"
    assert block["output"].startswith("[apply_patch]") and len(block["output"]) <= 500
    (call,) = out[4].content
    assert call["operation"]["path"] == "src/mod_0.py"
    assert len(call["operation"]["diff"]) <= 200 < len(messages[4].content[0]["operation"]["diff"])
    # A tool list and a verdict have no text to brief: as they were.
    assert out[3].content == messages[3].content and out[7].content == messages[7].content
    assert messages[5].content[0]["output"].endswith("ok\n")  # the input is not mutated


def test_cutting_keeps_the_status_an_apply_patch_output_needs_and_verdicts_whole() -> None:
    content: list[Any] = [*patch_output(0, "x" * 900).content, *approval(0).content]
    content += search_output(0).content
    slim = slim_blocks(content, drop_reasoning=False, ref="r1")
    assert slim[0]["status"] == "completed" and slim[0]["call_id"] == "call_0"
    assert "cut to fit" in slim[0]["output"]
    assert slim[1:] == content[1:]


@given(threshold=st.integers(300, 20_000), head=st.integers(0, 3))
def test_no_answer_is_ever_sent_without_its_call(threshold: int, head: int) -> None:
    messages = session()
    for pipeline in (
        ContextPipeline(threshold=threshold, tail_budget=threshold // 3, head_count=head),
        ContextPipeline(threshold=threshold, tail_budget=threshold // 3, low_water=1.0),
        ContextPipeline(threshold=threshold, tail_budget=threshold // 3, model=DIGEST),
    ):
        out = pipeline.invoke(messages)
        assert orphans(out) == []
        assert broken_pairs(out) == [], broken_pairs(out)


@pytest.mark.parametrize("threshold", [400, 2_000, 6_000])
def test_an_unpaired_reading_would_send_orphans(threshold: int) -> None:
    """The check above can fail: dropping the call of a kept answer is caught."""
    messages = session()
    out = ContextPipeline(threshold=threshold, tail_budget=threshold // 3).invoke(messages)
    calls = [m for m in out if isinstance(m, AIMessage)]
    assert calls, "nothing to drop"
    assert orphans([m for m in out if m is not calls[-1]]) != []
