from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import DIGEST, ContextPipeline, estimate_tokens, hard_truncate
from langchain_context_pipeline.messages import trim
from langchain_context_pipeline.messages.references import message_ref, span_ref
from langchain_context_pipeline.messages.trim import cut_json
from tests.support.invariants import assert_pairs_kept, snapshot


def long_history(n: int = 30, size: int = 2000) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("sys", id="s"), HumanMessage("the task", id="h")]
    for i in range(n):
        messages.append(HumanMessage(f"q{i} " + "x" * size, id=f"q{i}"))
        messages.append(AIMessage(f"a{i} " + "y" * size, id=f"a{i}"))
    return messages


def test_under_threshold_returns_the_same_list() -> None:
    messages = long_history(2, 10)
    assert hard_truncate(messages, threshold=10_000) is messages


def test_keeps_head_tail_and_a_note() -> None:
    messages = long_history()
    out = hard_truncate(messages, threshold=5000)
    assert estimate_tokens(out) <= 5000
    assert out[:2] == messages[:2]
    assert out[2].content.startswith("[") and "earlier messages were removed" in out[2].content
    dropped = len(messages) - (len(out) - 1)
    first, *index = out[2].content.splitlines()
    span = span_ref([m for m in messages if m not in out])
    assert first == (
        f"[{dropped} earlier messages were removed to fit the context window (ref={span}).]"
    )
    assert index[0] == "Index of the removed turns (mechanical):"
    assert index[-1].startswith("- user: q") and all(
        line.startswith(("- user: q", "(")) for line in index[1:]
    )
    assert out[3:] == messages[-(len(out) - 3) :]


def test_last_message_is_never_dropped_even_when_huge() -> None:
    messages = [*long_history(3), HumanMessage("zeta " * 80_000, id="huge")]
    out = hard_truncate(messages, threshold=3000)
    assert estimate_tokens(out) <= 3000
    assert out[-1].id == "huge"
    assert "chars trimmed" in out[-1].content
    assert out[-1].content.startswith("zeta") and out[-1].content.endswith("zeta ")


def test_system_messages_are_cut_last_and_never_dropped() -> None:
    system = "Answer in English. " * 2000
    messages: list[BaseMessage] = [
        SystemMessage(system, id="s"),
        HumanMessage("task " * 4000, id="h"),
    ]
    messages += [SystemMessage("policy", id="s2"), HumanMessage("last " * 3000, id="l")]
    threshold = estimate_tokens(messages[:1]) + 1000
    out = hard_truncate(messages, threshold=threshold)
    assert estimate_tokens(out) <= threshold
    ids = [m.id for m in out]
    assert ids[:2] == ["s", "h"] and "s2" in ids and ids[-1] == "l"
    # The system prompt alone fits, so the other kept messages are cut first.
    assert out[0].content == system


def test_parallel_tool_calls_stay_whole() -> None:
    calls = [
        {"name": "read_file", "args": {"path": f"f{i}"}, "id": f"p{i}", "type": "tool_call"}
        for i in range(3)
    ]
    messages: list[BaseMessage] = [SystemMessage("s"), HumanMessage("task")]
    for round_ in range(6):
        round_calls = [{**c, "id": f"{c['id']}-{round_}"} for c in calls]
        messages.append(AIMessage("", tool_calls=round_calls))
        messages += [ToolMessage("r" * 3000, tool_call_id=c["id"]) for c in round_calls]
    for threshold in range(600, 6000, 250):
        out = hard_truncate(messages, threshold=threshold)
        assert estimate_tokens(out) <= threshold
        assert_pairs_kept(messages, out)


def test_existing_orphans_are_tolerated() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("task"),
        ToolMessage("orphan " * 500, tool_call_id="gone"),
    ]
    messages += long_history(5)[2:]
    out = hard_truncate(messages, threshold=2000)
    assert estimate_tokens(out) <= 2000


def test_input_not_mutated_and_output_deterministic() -> None:
    messages = long_history()
    before = snapshot(messages)
    first = hard_truncate(messages, threshold=4000)
    assert snapshot(messages) == before
    assert snapshot(hard_truncate(messages, threshold=4000)) == snapshot(first)


def test_non_additive_counter_is_still_met() -> None:
    def framed(messages: list[BaseMessage]) -> int:
        return estimate_tokens(messages) + 200  # a fixed per-request overhead

    out = hard_truncate(long_history(), threshold=3000, token_counter=framed)
    assert framed(out) <= 3000


def test_bad_threshold() -> None:
    with pytest.raises(ValueError, match="threshold"):
        hard_truncate([], threshold=0)


def test_accepts_openai_dicts() -> None:
    dicts = [
        {"role": "user", "content": "x" * 4000},
        {"role": "assistant", "content": "y" * 4000},
        {"role": "user", "content": "ok"},
    ]
    out = hard_truncate(dicts, threshold=1100, head_count=1)
    assert [m.type for m in out] == ["human", "human", "human"]


@pytest.mark.parametrize(
    "text",
    ["é" * 20_000, "你好世界" * 3_000, "word " * 8_000, "0123456789" * 2_000],
    ids=["accented", "cjk", "prose", "digits"],
)
def test_an_oversized_message_is_cut_by_its_own_density(text: str) -> None:
    """The cut keeps most of the budget whatever the text's tokens per char.

    Dense text (one token or more per char) cut as if it held four chars a token
    used to lose everything but its marker.
    """
    messages = [HumanMessage(text, id="task"), AIMessage("ok", id="a")]
    out = hard_truncate(messages, threshold=1000)
    assert 700 <= estimate_tokens(out) <= 1000
    assert out[0].id == "task" and "chars trimmed" in str(out[0].content)


def test_arguments_cut_to_nothing_still_name_their_original() -> None:
    """The last resort replaces each call's arguments by one marker naming the message.

    Nested arguments under a budget that leaves them almost no room used to come
    out as ``{"": {"": [""]}}``: keys and values cut to nothing, no marker, no
    reference, and distinct keys merged.
    """
    call = AIMessage(
        "calling",
        id="a1",
        tool_calls=[
            {"name": "edit", "args": {"old_str": {"nested": ["日本 " * 400]}}, "id": "c1"},
            {"name": "find", "args": {"query": {"nested": ["x" * 3000]}, "n": 2}, "id": "c2"},
        ],
    )
    history: list[BaseMessage] = [
        SystemMessage("s " * 400, id="s"),
        HumanMessage("task", id="t"),
        call,
        ToolMessage("ok", tool_call_id="c1", id="r1"),
        ToolMessage("ok", tool_call_id="c2", id="r2"),
    ]
    budget = estimate_tokens([m for m in history if m is not call]) + 60
    out = hard_truncate(history, threshold=budget, head_count=2)
    assert estimate_tokens(out) <= budget
    (kept,) = [m for m in out if m.id == "a1"]
    assert isinstance(kept, AIMessage)
    for tool_call in kept.tool_calls:
        (value,) = tool_call["args"].values()
        assert f"ref={message_ref(call)}" in value
    assert hard_truncate(out, threshold=budget, head_count=2) == out  # a fixed point


def test_cut_keys_never_merge_two_entries() -> None:
    value = {"k" * 50 + "a": 1, "k" * 50 + "b": 2}
    out = cut_json(value, 8)
    assert len(out) == len(value)
    assert cut_json(out, 8) == out
    # At limit 0 too, and a cut dict's marker key stays a fixed point.
    for limit in (0, 1):
        many = cut_json({f"key{i}": "x" * 40 for i in range(9)}, limit)
        assert "…" in many and cut_json(many, limit) == many
        assert len(cut_json(value, limit)) == len(value)


_flat_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.text(max_size=300),
)


@given(
    st.dictionaries(st.text(max_size=12), _flat_values, max_size=8),
    st.sampled_from([0, 1, 2, 8, 40, 200]),
    st.integers(min_value=0, max_value=40),
)
def test_a_flat_dict_is_cut_as_the_general_path_cuts_it(
    value: dict[str, object], limit: int, depth: int
) -> None:
    """The one-loop path for flat tool arguments gives what the general walk gives.

    Same result, same size, and the caller's very dict when nothing is cut (also at
    and past the depth where a container becomes a marker).
    """
    fast = trim._cut(value, limit, depth)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trim, "_flat_size", lambda *_: None)
        general = trim._cut(value, limit, depth)
    assert fast == general
    assert (fast[0] is value) == (general[0] is value)


def test_a_message_nothing_can_cut_is_kept_as_the_callers_object() -> None:
    """Truncation used to return an equal copy of an uncuttable message.

    The output then held no object of the caller's for it, so the message counted
    as replaced, with no reference naming it.
    """
    last = HumanMessage([{"type": "text", "text": "alpha" * 12}], id="m7")
    args = {
        "content": {"nested": ["b"]},
        "old_str": {"nested": ["\n" * 195]},
        "query": {"nested": ["\n" * 996]},
        "command": {"nested": ["alphaalpha"]},
    }
    go = {"name": "browser_go", "args": {}, "id": "c4"}
    history: list[BaseMessage] = [
        SystemMessage("a", id="m0"),
        HumanMessage("日本" * 210, id="m1"),
        AIMessage(
            [
                {"type": "text", "text": "\n" * 1738},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
            id="m3",
            tool_calls=[{"name": "read_file", "args": args, "id": "c2"}],
        ),
        AIMessage([{"type": "text", "text": "np"}], id="m5", tool_calls=[go]),
        ToolMessage("src/app.py" * 4000, tool_call_id="c4", id="m6"),
        last,
    ]
    pipeline = ContextPipeline(
        threshold=3800,
        tail_budget=527,
        head_count=3,
        model=DIGEST,
        tool_output_limit=927,
        tool_args_limit=284,
    )
    out = pipeline.invoke(history)
    assert "truncate" in pipeline.compress(history).report.stages
    assert out[-1] is last


def _task_then_one_turn(reasoning: bool) -> list[BaseMessage]:
    """A task, then one tool turn (the last unit, kept whole) bigger than what is left."""
    content: list[str | dict[str, object]] = []
    if reasoning:  # kept byte for byte in the last unit
        encrypted = "gAAAA" + "Zx9q" * 150
        content.append(
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": encrypted}
        )
    content += [
        {"type": "text", "text": "Running it."},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'},
    ]
    return [
        HumanMessage(" ".join(f"task{i} word" for i in range(60))),
        AIMessage(content),
        ToolMessage("output line\n" * 100, tool_call_id="c1"),
    ]


@pytest.mark.parametrize(
    ("reasoning", "threshold"), [(True, 800), (True, 760), (False, 180), (False, 240)]
)
def test_the_task_keeps_what_room_is_left_when_nothing_is_dropped(
    reasoning: bool, threshold: int
) -> None:
    # Nothing is dropped here (there is no middle), so no removal note is written:
    # its price, and a marker longer than the tiny arguments it would replace, must
    # not be taken from the task, which is cut to what is left of the budget.
    messages = _task_then_one_turn(reasoning)
    out = ContextPipeline(threshold=threshold, model=DIGEST).compress(messages).messages
    assert estimate_tokens(out) <= threshold
    assert len(out) == 3 and out[1].tool_calls == messages[1].tool_calls
    assert out[1].content == messages[1].content
    kept = [w for w in out[0].text.split() if w.startswith("task")]
    assert kept[:3] == ["task0", "task1", "task2"]
    assert threshold - estimate_tokens(out) < 40
