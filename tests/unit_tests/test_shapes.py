"""Regressions: what real providers send (block formats, huge and deep arguments, reused ids)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from langchain_context_pipeline import (
    DIGEST,
    BudgetError,
    ContextPipeline,
    Pruner,
    estimate_tokens,
    hard_truncate,
)
from langchain_context_pipeline.messages.units import Split, group_units
from langchain_context_pipeline.stages.digest import build_digest
from langchain_context_pipeline.tokens.counters import tool_call_ids
from tests.support.fakes import EchoSummarizer

SYSTEM = "You are a careful coding agent. " * 40
TASK = "Collect the ids of every open ticket and close the stale ones. " * 20


async def _both(pipeline: ContextPipeline, messages: Any) -> list[BaseMessage]:
    """Compress sync and async; both must give the same messages."""
    sync = pipeline.compress(messages).messages
    async_ = (await pipeline.acompress(messages)).messages
    assert [m.model_dump_json() for m in sync] == [m.model_dump_json() for m in async_]
    return sync


async def test_a_huge_list_argument_is_cut_not_the_system_prompt_or_the_task() -> None:
    call = {"name": "close", "args": {"ids": list(range(3_000))}, "id": "c1"}
    history = [
        SystemMessage(SYSTEM, id="s"),
        HumanMessage(TASK, id="t"),
        AIMessage("", tool_calls=[call], id="a"),
        ToolMessage("closed", tool_call_id="c1", id="r"),
    ]
    assert estimate_tokens(history) > 4_000
    pipeline = ContextPipeline(threshold=4_000)
    out = await _both(pipeline, history)
    assert estimate_tokens(out) <= 4_000
    assert out[0] is history[0] and out[1] is history[1] and out[3] is history[3]
    ids = out[2].tool_calls[0]["args"]["ids"]
    assert ids[0] == 0 and "more items" in ids[-1]
    # A second pass changes nothing.
    assert pipeline.compress(out).messages is out


async def test_system_messages_alone_over_budget_raise_a_budget_error() -> None:
    history = [SystemMessage("rule " * 2_000), HumanMessage("hi"), AIMessage("hello " * 500)]
    pipeline = ContextPipeline(threshold=1_000, tail_budget=100)
    with pytest.raises(BudgetError, match=r"system message\(s\) alone take \d+ tokens.*1000"):
        pipeline.compress(history)
    with pytest.raises(BudgetError) as caught:
        await pipeline.acompress(history)
    assert caught.value.budget == 1_000 and caught.value.required > 1_000
    with pytest.raises(BudgetError):
        hard_truncate(history, threshold=1_000)


def _over_budget_history() -> list[BaseMessage]:
    """System messages over a 1,000-token budget by themselves, the newest turn a tool loop."""
    history: list[BaseMessage] = [
        SystemMessage("rule " * 2_000, id="s"),
        HumanMessage(TASK, id="t"),
        HumanMessage("more " * 300, id="m"),
        SystemMessage("POLICY: never push to main.", id="policy"),
        AIMessage("ok " * 300, id="o"),
    ]
    return history + _thinking_turn()


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_over_budget_minimal_sends_the_smallest_valid_request(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    history = _over_budget_history()
    pipeline = ContextPipeline(threshold=1_000, tail_budget=100, model=DIGEST)
    if path == "sync":
        result = pipeline.compress(history, over_budget="minimal")
    else:
        result = await pipeline.acompress(history, over_budget="minimal")
    out = result.messages
    # The system messages whole, a note for what went, the newest turn with its pair.
    assert out[0] is history[0] and out[2] is history[3]
    assert "earlier messages were removed" in str(out[1].content)
    assert [m.id for m in out[3:]] == ["a", "r"]
    assert out[3].tool_calls[0]["id"] == "tu1" and out[4].tool_call_id == "tu1"  # type: ignore[attr-defined]
    # Cut to the minimum, the thinking block and the call id kept whole.
    assert estimate_tokens(out[3:]) < estimate_tokens(history[5:]) // 10
    assert out[3].content[0] == history[5].content[0]  # type: ignore[index]
    assert result.report.stages == ["minimal"]
    assert result.report.over_budget == estimate_tokens(out) - 1_000 > 0
    assert "system message(s) alone take" in caplog.text
    assert "smallest valid request" in caplog.text
    # The default still raises, with the sizes.
    with pytest.raises(BudgetError, match=r"system message\(s\) alone take \d+ tokens"):
        pipeline.compress(history)


def test_over_budget_minimal_when_reserved_tokens_take_the_whole_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = [HumanMessage(TASK, id="t"), *_thinking_turn()]
    pipeline = ContextPipeline(threshold=1_000, tail_budget=100)
    with pytest.raises(BudgetError, match="leave nothing of threshold 1000") as caught:
        pipeline.compress(history, reserved_tokens=1_200)
    assert caught.value.required == 1_200 and caught.value.budget == 1_000
    result = pipeline.compress(history, reserved_tokens=1_200, over_budget="minimal")
    assert [m.id for m in result.messages[1:]] == ["a", "r"]
    assert result.report.limit == -200
    assert result.report.over_budget == estimate_tokens(result.messages)
    assert "reserved_tokens (1200" in caplog.text


def _thinking_turn() -> list[BaseMessage]:
    thinking = {"type": "thinking", "thinking": "Let me list them. " * 40, "signature": "sig=="}
    tool_use = {"type": "tool_use", "id": "tu1", "name": "ls", "input": {"path": "."}}
    return [
        AIMessage(
            [thinking, {"type": "text", "text": "Listing the files. " * 400}, tool_use],
            tool_calls=[{"name": "ls", "args": {"path": "."}, "id": "tu1"}],
            id="a",
        ),
        ToolMessage("file\n" * 4_000, tool_call_id="tu1", id="r"),
    ]


async def test_the_newest_tool_turn_keeps_its_thinking_block() -> None:
    history = [SystemMessage("be brief", id="s"), HumanMessage("list files", id="t")]
    history += [HumanMessage("more " * 300), AIMessage("ok " * 300)]
    history += _thinking_turn()
    out = await _both(ContextPipeline(threshold=1_000, tail_budget=200), history)
    assert estimate_tokens(out) <= 1_000
    kept = next(m for m in out if m.id == "a")
    assert isinstance(kept.content, list)
    assert kept.content[0] == history[4].content[0]  # type: ignore[index]


def _anthropic_turns(n: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [{"role": "user", "content": "check every file"}]
    for i in range(n):
        turns.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading file {i}."},
                    {
                        "type": "tool_use",
                        "id": f"tu{i}",
                        "name": "read",
                        "input": {"path": f"f{i}"},
                    },
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"tu{i}", "content": "x" * 3_000}
        turns.append({"role": "user", "content": [result]})
    return turns


def test_anthropic_tool_use_and_tool_result_form_one_unit() -> None:
    messages = convert_to_messages(_anthropic_turns(3))
    assert group_units(messages) == [(0, 1), (1, 3), (3, 5), (5, 7)]


@pytest.mark.parametrize("threshold", [600, 1_100, 1_700, 2_600])
async def test_anthropic_pairs_survive_every_stage(threshold: int) -> None:
    turns = _anthropic_turns(6)
    for model in (None, DIGEST):
        pipeline = ContextPipeline(threshold=threshold, tail_budget=threshold // 3, model=model)
        out = await _both(pipeline, turns)
        assert estimate_tokens(out) <= threshold
        called: set[str] = set()
        for message in out:
            called.update(tool_call_ids(message))
            if isinstance(message.content, list) and not isinstance(message, AIMessage):
                for block in message.content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        assert block["tool_use_id"] in called, "a tool_result lost its tool_use"


def test_every_copy_of_the_arguments_is_cut() -> None:
    args = {"content": "y" * 6_000}
    raw = json.dumps(args)
    ai = AIMessage(
        [
            {
                "type": "function_call",
                "call_id": "c1",
                "id": "fc_1",
                "name": "write",
                "arguments": raw,
            },
            {"type": "tool_use", "id": "c1", "name": "write", "input": args},
            {"type": "tool_call", "id": "c1", "name": "write", "args": args},
        ],
        tool_calls=[{"name": "write", "args": args, "id": "c1"}],
        additional_kwargs={
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "write", "arguments": raw}}
            ]
        },
    )
    history = [
        HumanMessage("write it"),
        ai,
        ToolMessage("done", tool_call_id="c1"),
        HumanMessage("ok"),
    ]
    out, stats = Pruner(tail_budget=0).prune(history, Split.of(history, 0))
    assert stats.args_shortened == 1
    dumped = out[1].model_dump_json()
    assert "y" * 300 not in dumped, "a copy of the arguments kept its full size"
    blocks = out[1].content
    assert isinstance(blocks, list)
    assert len(json.loads(blocks[0]["arguments"])["content"]) <= 200
    # A message whose only copy is a Responses block is cut too.
    only_block = AIMessage([ai.content[0]])  # type: ignore[index]
    history = [HumanMessage("write it"), only_block, ToolMessage("done", tool_call_id="c1")]
    out, stats = Pruner(tail_budget=0).prune([*history, HumanMessage("ok")], Split.of(history, 0))
    assert stats.args_shortened == 1 and "y" * 300 not in out[1].model_dump_json()


async def test_deeply_nested_arguments_raise_no_recursion_error() -> None:
    deep: Any = "leaf"
    for _ in range(495):
        deep = {"a": [deep]}
    call = {"name": "store", "args": {"tree": deep, "note": "n" * 9_000}, "id": "c1"}
    history = [
        SystemMessage("sys"),
        HumanMessage("task"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("r" * 3_000, tool_call_id="c1"),
        HumanMessage("go on " * 300),
        AIMessage("ok " * 300),
    ]
    for model in (None, DIGEST, EchoSummarizer()):
        out = await _both(ContextPipeline(threshold=1_000, tail_budget=200, model=model), history)
        assert estimate_tokens(out) <= 1_000
    out = await _both(ContextPipeline(threshold=600, tail_budget=100), history[:4])
    assert estimate_tokens(out) <= 600


def test_a_reused_call_id_pairs_each_result_with_its_own_call() -> None:
    middle: list[BaseMessage] = []
    for i, size in enumerate([100, 2_000, 30_000]):
        call = {"name": "read_file", "args": {"path": f"f{i}.py"}, "id": "0"}
        middle += [AIMessage("", tool_calls=[call]), ToolMessage("z" * size, tool_call_id="0")]
    digest = build_digest(middle, None, 4_000)
    assert "[read_file] f0.py (100 chars)" in digest
    assert "[read_file] f1.py (2,000 chars)" in digest
    # Two calls made before their results: each result goes to the nearest open call.
    call = {"name": "x", "args": {}, "id": "0"}
    messages = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[call]),
        AIMessage("", tool_calls=[call]),
        ToolMessage("a", tool_call_id="0"),
        ToolMessage("b", tool_call_id="0"),
    ]
    assert group_units(messages) == [(0, 1), (1, 5)]


def test_pruning_long_text_keeps_the_text_blocks_id_annotations_and_citations() -> None:
    text = "w" * 5_000
    responses = {"type": "text", "text": text, "id": "msg_1", "annotations": [{"url": "u"}]}
    anthropic = {"type": "text", "text": text, "citations": [{"cited_text": "c"}]}
    for block in (responses, anthropic):
        history = [HumanMessage("go"), AIMessage([block]), HumanMessage("next")]
        out, stats = Pruner(tail_budget=0).prune(history, Split.of(history, 0))
        assert stats.texts_shortened == 1
        new = out[1].content[0]  # type: ignore[index]
        assert isinstance(new, dict)
        assert {k: v for k, v in new.items() if k != "text"} == {
            k: v for k, v in block.items() if k != "text"
        }
        assert "chars trimmed" in new["text"]


@pytest.mark.parametrize("role", ["system", "developer"])
def test_a_chat_message_with_a_system_role_is_kept_as_a_system_message(role: str) -> None:
    history = [HumanMessage("task"), HumanMessage("x" * 8_000)]
    history += [ChatMessage(content="POLICY: never push to main.", role=role, id="p")]
    history += [HumanMessage("y" * 8_000), AIMessage("done")]
    assert Split.of(history, 1).systems == frozenset({2})
    out = ContextPipeline(threshold=1_000, tail_budget=100).compress(history).messages
    assert any(m.id == "p" and m.content == "POLICY: never push to main." for m in out)
