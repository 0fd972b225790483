from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import Pruner
from langchain_context_pipeline.messages.references import format_ref, message_ref
from langchain_context_pipeline.messages.units import Split, group_units
from langchain_context_pipeline.tokens.meter import Meter
from tests.support.invariants import snapshot
from tests.support.strategies_shapes import broken_pairs, is_system
from tests.support.strategies_shapes import conversations as shape_conversations


def read_call(cid: str = "c1", path: str = "src/app.py") -> dict[str, Any]:
    return {"name": "read_file", "args": {"path": path}, "id": cid, "type": "tool_call"}


def history_with_old_read(size: int = 45_210) -> list[BaseMessage]:
    return [
        SystemMessage("You are a coding agent."),
        HumanMessage("fix the bug"),
        AIMessage("", tool_calls=[read_call()], id="a1"),
        ToolMessage("x" * size, tool_call_id="c1", name="read_file", id="t1"),
        HumanMessage("recent " * 50),
    ]


T1 = format_ref(message_ref(ToolMessage("", tool_call_id="c1", id="t1")))
"""The reference every brief of ``t1`` ends with."""


def test_old_long_tool_result_becomes_a_brief_from_its_call_args() -> None:
    out = Pruner(tail_budget=100).invoke(history_with_old_read())
    assert out[3].content == f"[read_file] src/app.py (45,210 chars) {T1}"


def test_short_tool_result_is_kept() -> None:
    messages = history_with_old_read(size=500)
    out = Pruner(tail_budget=100).invoke(messages)
    assert out[3] is messages[3]


def test_tail_is_protected() -> None:
    messages = history_with_old_read()
    out = Pruner(tail_budget=100_000).invoke(messages)
    assert [m.content for m in out] == [m.content for m in messages]


def test_empty_input_gives_empty_output() -> None:
    assert Pruner().invoke([]) == []


def test_tool_args_are_cut_recursively() -> None:
    args = {
        "path": "a.py",
        "content": "c" * 5000,
        "edits": [{"old": "o" * 300, "new": "n" * 10}],
        "n": 3,
    }
    call = {"name": "write_file", "args": args, "id": "w1", "type": "tool_call"}
    messages = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("ok", tool_call_id="w1"),
        HumanMessage("next"),
    ]
    out = Pruner(tail_budget=5).invoke(messages)
    new_args = out[1].tool_calls[0]["args"]
    assert len(new_args["content"]) <= 200
    assert new_args["content"].startswith("c" * 150)
    assert f"chars {format_ref(message_ref(messages[1]))}]" in new_args["content"]
    assert len(new_args["edits"][0]["old"]) <= 200
    assert new_args["edits"][0]["new"] == "n" * 10
    assert new_args["n"] == 3 and new_args["path"] == "a.py"


def test_raw_openai_tool_calls_and_tool_use_blocks_get_the_same_cut() -> None:
    args = {"content": "c" * 1000}
    call = {"name": "write_file", "args": args, "id": "w1", "type": "tool_call"}
    raw = [
        {
            "id": "w1",
            "type": "function",
            "function": {"name": "write_file", "arguments": '{"content": "' + "c" * 1000 + '"}'},
        }
    ]
    blocks = [
        {"type": "text", "text": "writing"},
        {"type": "tool_use", "id": "w1", "name": "write_file", "input": args},
    ]
    message = AIMessage(
        blocks, tool_calls=[call], additional_kwargs={"tool_calls": raw, "other": 1}
    )
    out = Pruner(tail_budget=0).invoke(
        [HumanMessage("t"), message, ToolMessage("ok", tool_call_id="w1"), HumanMessage("n")]
    )[1]
    assert len(out.additional_kwargs["tool_calls"][0]["function"]["arguments"]) < 300
    assert out.additional_kwargs["other"] == 1
    assert len(out.content[1]["input"]["content"]) <= 200


def test_malformed_tool_call_args_do_not_crash() -> None:
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "bash", "args": "{not json " + "z" * 900, "id": "b1", "error": "bad json"}
        ],
    )
    out = Pruner(tail_budget=0).invoke(
        [HumanMessage("t"), bad, ToolMessage("y" * 900, tool_call_id="b1"), HumanMessage("n")]
    )
    assert len(out[1].invalid_tool_calls[0]["args"]) <= 200
    assert out[2].content.startswith("[")  # briefed although its call's args were unusable


def test_long_assistant_text_keeps_head_and_tail_even_with_tool_calls() -> None:
    text = "H" * 800 + "M" * 3000 + "T" * 400
    message = AIMessage(
        text, tool_calls=[{"name": "bash", "args": {"command": "x" * 500}, "id": "b1"}]
    )
    out = Pruner(tail_budget=0).invoke(
        [HumanMessage("t"), message, ToolMessage("ok", tool_call_id="b1"), HumanMessage("n")]
    )[1]
    assert out.content.startswith("H" * 800)
    assert out.content.endswith("T" * 400)
    assert "M" * 10 not in out.content
    assert "3,000 chars trimmed" in out.content
    assert len(out.tool_calls[0]["args"]["command"]) <= 200


def test_assistant_block_text_is_trimmed_and_other_blocks_kept() -> None:
    blocks = [
        {"type": "reasoning", "reasoning": "r"},
        {"type": "text", "text": "a" * 3000},
        {"type": "text", "text": "b" * 100},
    ]
    out = Pruner(tail_budget=0).invoke([HumanMessage("t"), AIMessage(blocks), HumanMessage("n")])[1]
    assert out.content[0] == {"type": "reasoning", "reasoning": "r"}
    assert out.content[1]["text"].endswith("b" * 100)
    assert len(out.content) == 2


def test_system_and_human_messages_are_never_touched() -> None:
    messages = [
        SystemMessage("s" * 5000),
        HumanMessage("h" * 5000),
        SystemMessage("z" * 5000),
        HumanMessage("n"),
    ]
    out = Pruner(tail_budget=0).invoke(messages)
    assert all(a is b for a, b in zip(out, messages, strict=True))


def test_input_is_not_mutated_and_metadata_is_kept() -> None:
    tool = ToolMessage(
        "x" * 2000,
        tool_call_id="c1",
        name="read_file",
        id="t1",
        additional_kwargs={"k": 1},
        response_metadata={"r": 2},
        artifact={"raw": True},
    )
    messages = [
        HumanMessage("t"),
        AIMessage("", tool_calls=[read_call()], id="a1"),
        tool,
        HumanMessage("n"),
    ]
    before = snapshot(messages)
    out = Pruner(tail_budget=0).invoke(messages)
    assert snapshot(messages) == before
    new = out[2]
    assert isinstance(new, ToolMessage)
    assert (new.id, new.name, new.tool_call_id, new.artifact) == (
        "t1",
        "read_file",
        "c1",
        {"raw": True},
    )
    assert new.additional_kwargs == {"k": 1}
    assert new.response_metadata["r"] == 2


def test_tool_result_with_image_is_briefed() -> None:
    content = [
        {"type": "text", "text": "screenshot"},
        {"type": "image_url", "image_url": {"url": "data:,"}},
    ]
    call = {"name": "browser_screenshot", "args": {"url": "https://a.b"}, "id": "s1"}
    out = Pruner(tail_budget=0).invoke(
        [
            HumanMessage("t"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(content, tool_call_id="s1"),
            HumanMessage("n"),
        ]
    )
    ref = format_ref(message_ref(ToolMessage(content, tool_call_id="s1")))
    assert out[2].content == f"[browser_screenshot] https://a.b (10 chars) +1 image(s) {ref}"


def test_custom_brief_registry() -> None:
    def brief(name: str, args: Mapping[str, Any], output: str) -> str:
        return f"[{name}] {args['path']} (custom)"

    out = Pruner(tail_budget=0, briefs={"read_file": brief}).invoke(history_with_old_read())
    assert out[3].content == f"[read_file] src/app.py (custom) {T1}"


def test_pruning_twice_changes_nothing() -> None:
    pruner = Pruner(tail_budget=0)
    once = pruner.invoke(history_with_old_read())
    assert snapshot(pruner.invoke(once)) == snapshot(once)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tool_output_limit": -1}, "tool_output_limit"),
        ({"tool_args_limit": -5}, "tool_args_limit"),
        ({"tail_budget": -1}, "tail_budget"),
        ({"assistant_text_limit": 1000}, "must leave room"),
    ],
)
def test_bad_settings_raise(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pruner(**kwargs)


def test_non_message_item_names_its_index() -> None:
    with pytest.raises(TypeError, match=r"messages\[1\] is int"):
        Pruner().invoke([HumanMessage("a"), 7])


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_sync_and_async_agree(mode: str) -> None:
    pruner = Pruner(tail_budget=0)
    messages = history_with_old_read()
    out = pruner.invoke(messages) if mode == "sync" else await pruner.ainvoke(messages)
    assert out[3].content == f"[read_file] src/app.py (45,210 chars) {T1}"


def test_repeated_pruning_reuses_results_with_the_same_stats() -> None:
    pruner = Pruner(tail_budget=0)
    messages = history_with_old_read()
    first, stats1 = pruner.prune(messages, Split.of(messages, 0))
    second, stats2 = pruner.prune(messages, Split.of(messages, 0))
    assert second[3] is first[3]  # remembered, not rebuilt
    assert stats1 == stats2 and stats1.briefed == 1


def test_a_message_changed_in_place_is_pruned_again() -> None:
    pruner = Pruner(tail_budget=0)
    messages = history_with_old_read()
    first, _ = pruner.prune(messages, Split.of(messages, 0))
    messages[3].content = "y" * 9_999
    second, _ = pruner.prune(messages, Split.of(messages, 0))
    assert first[3].content == f"[read_file] src/app.py (45,210 chars) {T1}"
    assert second[3].content == f"[read_file] src/app.py (9,999 chars) {T1}"


def test_a_different_call_for_the_same_result_is_briefed_again() -> None:
    pruner = Pruner(tail_budget=0)
    tool = ToolMessage("x" * 2000, tool_call_id="c1")
    one = [
        HumanMessage("t"),
        AIMessage("", tool_calls=[read_call(path="a.py")]),
        tool,
        HumanMessage("n"),
    ]
    two = [
        HumanMessage("t"),
        AIMessage("", tool_calls=[read_call(path="b.py")]),
        tool,
        HumanMessage("n"),
    ]
    assert pruner.prune(one, Split.of(one, 0))[0][2].content.startswith("[read_file] a.py")
    assert pruner.prune(two, Split.of(two, 0))[0][2].content.startswith("[read_file] b.py")


def test_a_tool_message_is_briefed_again_when_its_call_is_edited_in_place() -> None:
    # The memo knows the call a result answers by the identity of the calling
    # message's index entry: an edit in place of that message must still miss,
    # every way an agent makes the edit, turn after turn.
    messages = [
        HumanMessage("t"),
        AIMessage("", tool_calls=[read_call(path="a.py")]),
        ToolMessage("x" * 2000, tool_call_id="c1"),
        HumanMessage("n"),
    ]
    pruner = Pruner(tail_budget=0)
    where = Split.of(messages, 0)
    for _ in range(2):
        assert pruner.prune(messages, where)[0][2].content.startswith("[read_file] a.py")
    call = messages[1]
    assert isinstance(call, AIMessage)
    call.tool_calls[0]["args"]["path"] = "b.py"
    assert pruner.prune(messages, where)[0][2].content.startswith("[read_file] b.py")
    call.tool_calls[0]["name"] = "view"
    assert pruner.prune(messages, where)[0][2].content.startswith("[view] b.py")
    call.tool_calls = [read_call(path="c.py")]
    assert pruner.prune(messages, where)[0][2].content.startswith("[read_file] c.py")
    assert pruner.prune(messages, where)[0][2].content.startswith("[read_file] c.py")


def test_the_memo_keeps_no_message_alive() -> None:
    import gc

    pruner = Pruner(tail_budget=0)
    messages = history_with_old_read()
    pruner.prune(messages, Split.of(messages, 0))
    assert pruner._memo
    del messages
    gc.collect()
    assert pruner._memo == {}


def test_a_deep_copy_of_a_warm_pruner_prunes_alike_with_a_memo_of_its_own() -> None:
    import copy
    import gc

    pruner = Pruner(tail_budget=0, tool_output_limit=300)
    messages = history_with_old_read()
    first = pruner.prune(messages, Split.of(messages, 0))
    clone = copy.deepcopy(pruner)
    assert clone._memo == {} and pruner._memo
    assert clone.settings == pruner.settings and clone.settings is not pruner.settings
    again = clone.prune(messages, Split.of(messages, 0))
    assert [m.content for m in again[0]] == [m.content for m in first[0]]
    assert again[1] == first[1]
    assert set(clone._memo) == set(pruner._memo)
    del messages, first, again
    gc.collect()
    assert clone._memo == {} and pruner._memo == {}


# -- tool results carried as blocks of a user message (Anthropic, Responses) -----------------


def anthropic_history(size: int = 45_210) -> list[BaseMessage]:
    """The same read as ``history_with_old_read``, the way Anthropic sends it."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    grep = {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {"query": "bug"}}
    return [
        SystemMessage("You are a coding agent."),
        HumanMessage("fix the bug", id="task"),
        AIMessage([{"type": "text", "text": "Reading."}, use, grep], id="a1"),
        HumanMessage(
            [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * size},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "match\n" * 2000}],
                    "is_error": False,
                },
                {"type": "text", "text": "Both results are above."},
            ],
            id="r1",
        ),
        HumanMessage("recent " * 50, id="recent"),
    ]


def test_old_tool_result_blocks_are_briefed_like_tool_messages() -> None:
    messages = anthropic_history()
    out = Pruner(tail_budget=100).invoke(messages)
    ref = format_ref(message_ref(messages[3]))
    assert out[3].content == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": f"[read_file] a.py (45,210 chars) {ref}",
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": f'[search] "bug" (12,000 chars result) {ref}',
            "is_error": False,
        },
        {"type": "text", "text": "Both results are above."},
    ]
    assert out[3].id == "r1" and out[3].response_metadata["context_pipeline"] == {"kind": "brief"}
    assert [m.content for m in out[:3]] == [m.content for m in messages[:3]]
    assert out[4] is messages[4]
    assert messages[3].content[0]["content"] == "x" * 45_210  # the caller's message is intact


def test_a_responses_function_call_output_block_is_briefed() -> None:
    call = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "bash",
        "arguments": '{"command": "pytest -q"}',
    }
    output = {"type": "function_call_output", "call_id": "call_1", "output": "FAILED\n" * 300}
    messages: list[BaseMessage] = [
        HumanMessage("run the tests"),
        AIMessage([call], id="a1"),
        HumanMessage([output], id="r1"),
        HumanMessage("recent " * 50),
    ]
    out = Pruner(tail_budget=100).invoke(messages)
    ref = format_ref(message_ref(messages[2]))
    block = {**output, "output": f'[bash] "pytest -q" -> 300 lines output; last: FAILED {ref}'}
    assert out[2].content == [block]


def test_short_and_recent_tool_result_blocks_are_kept() -> None:
    short = anthropic_history(size=500)
    short[3] = short[3].model_copy(update={"content": short[3].content[:1]})
    assert Pruner(tail_budget=100).invoke(short)[3] is short[3]
    recent = anthropic_history()
    assert Pruner(tail_budget=100_000).invoke(recent) == recent


def test_briefed_blocks_count_and_a_second_pass_changes_nothing() -> None:
    messages = anthropic_history()
    pruner = Pruner()
    where = Split.of(messages, 2).with_tail(messages, 100, Meter(pruner.token_counter))
    once, stats = pruner.prune(messages, where)
    assert stats.briefed == 2
    twice, again = Pruner().prune(once, where)
    assert twice[3] is once[3] and again.briefed == 0


def test_a_tool_result_block_is_briefed_again_when_its_call_is_edited_in_place() -> None:
    messages = anthropic_history()
    pruner = Pruner(tail_budget=100)
    assert "a.py" in pruner.invoke(messages)[3].content[0]["content"]
    messages[2].content[1]["input"]["path"] = "b.py"
    assert "b.py" in pruner.invoke(messages)[3].content[0]["content"]


def _result_text(value: Any) -> tuple[str, int]:
    """The text and image count of a tool result (string or blocks), read from the formats."""
    if isinstance(value, str):
        return value, 0
    texts = [b if isinstance(b, str) else b.get("text", "") for b in value if _is_text(b)]
    images = sum(1 for b in value if isinstance(b, dict) and b.get("type") == "image_url")
    return "\n".join(texts), images


def _is_text(block: Any) -> bool:
    return isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")


def results_in(message: BaseMessage) -> list[tuple[str, Any, dict[str, Any] | None]]:
    """Each tool result a message carries: (call id, result, the block or None)."""
    if isinstance(message, ToolMessage):
        custom = [
            b
            for b in message.content
            if isinstance(b, dict) and b.get("type") == "custom_tool_call_output"
        ]
        if custom:  # a custom tool's output: the result is the block's (kept) output
            return [(message.tool_call_id, custom[0]["output"], custom[0])]
        return [(message.tool_call_id, message.content, None)]
    if isinstance(message, AIMessage) or isinstance(message.content, str):
        return []
    return [
        (b["tool_use_id"], b["content"], b)
        for b in message.content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


@given(shape_conversations(), st.integers(0, 1_000))
def test_every_old_bulky_result_is_briefed_in_every_format(
    messages: list[BaseMessage], limit: int
) -> None:
    out = Pruner(tool_output_limit=limit, tail_budget=0).invoke(messages)
    tail = group_units(messages)[-1][0] if messages else 0
    assert broken_pairs(out) == broken_pairs(messages)
    for index, (before, after) in enumerate(zip(messages, out, strict=True)):
        if index >= tail or is_system(before):
            assert after is before
            continue
        old_results, new_results = results_in(before), results_in(after)
        assert [r[0] for r in new_results] == [r[0] for r in old_results]  # ids and order
        for (_, old, old_block), (_, new, new_block) in zip(old_results, new_results, strict=True):
            text, images = _result_text(old)
            # Other parts (JSON, any value) count too, by their JSON size: either is fine.
            others = not isinstance(old, str) and any(
                not _is_text(b) and not (isinstance(b, dict) and b.get("type") == "image_url")
                for b in old
            )
            if len(text) + images * 6400 <= limit and (not others or new == old):
                assert new == old
                continue
            assert isinstance(new, str) and len(new) <= limit
            if limit >= 40:  # room for the reference
                assert new.endswith(format_ref(message_ref(before)))
            if old_block is not None:  # the block keeps everything but its result
                assert new_block is not None
                key = "output" if old_block["type"] == "custom_tool_call_output" else "content"
                assert {k: v for k, v in new_block.items() if k != key} == {
                    k: v for k, v in old_block.items() if k != key
                }


@given(shape_conversations(), st.integers(0, 1_000), st.integers(0, 40), st.data())
def test_one_pruning_up_to_the_tail_serves_every_tail_start(
    messages: list[BaseMessage], limit: int, head: int, data: st.DataObject
) -> None:
    # The pipeline prunes once and keeps that pruning up to the boundary it settles
    # on: a fresh Pruner given that boundary as the tail start gives the same list
    # (the very same objects) and the same stats.
    from langchain_context_pipeline.stages.pruner import sum_stats

    where = Split.of(messages, head)
    out, each = Pruner(tool_output_limit=limit).prune_each(messages, where)
    assert len(out) == len(each) == len(messages)
    tail = data.draw(st.integers(0, len(messages)))
    alone, stats = Pruner(tool_output_limit=limit).prune(messages, replace(where, tail_start=tail))
    assert snapshot(alone) == snapshot(out[:tail] + messages[tail:])
    assert all(a is b for a, b in zip(alone[tail:], messages[tail:], strict=True))
    assert stats == sum_stats(each[:tail])
    assert all(own is None for own in each[: where.head_end])


def test_the_stats_types_are_one_module_s_under_their_old_names() -> None:
    from langchain_context_pipeline.stages import condenser, pruner, stats, truncate

    assert pruner.PruneStats is stats.PruneStats
    assert condenser.CondenseStats is stats.CondenseStats
    assert truncate.TruncateStats is stats.TruncateStats
