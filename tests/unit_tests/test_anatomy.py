"""The message anatomy: one reading of a message, one pairing rule, one table of kinds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from benchmarks.parse import as_blocks, recording_builds, request_ends
from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.cli.transcripts import load_transcript
from langchain_context_pipeline.integrations.archive import plan_records
from langchain_context_pipeline.messages import anatomy
from langchain_context_pipeline.messages.blocks import call_ids, call_index, result_ids
from langchain_context_pipeline.messages.countable import countable_parts
from langchain_context_pipeline.messages.references import call_of, message_ref
from langchain_context_pipeline.recall import create_recall_tool
from langchain_context_pipeline.stages.digest import build_index
from langchain_context_pipeline.stages.pruner import Pruner
from langchain_context_pipeline.stages.truncate import hard_truncate
from langchain_context_pipeline.tokens.counters import message_text

LONG = " ".join(f"word{i}" for i in range(1500))


def _reused_ids() -> list[BaseMessage]:
    """Two turns whose calls and results all use the id ``"0"`` (as some servers do)."""
    return [
        HumanMessage("read both files", id="h"),
        AIMessage("", tool_calls=[{"id": "0", "name": "read", "args": {"path": "a.py"}}], id="a1"),
        ToolMessage("contents of a", tool_call_id="0", id="t1"),
        AIMessage("", tool_calls=[{"id": "0", "name": "read", "args": {"path": "b.py"}}], id="a2"),
        ToolMessage("contents of b", tool_call_id="0", id="t2"),
    ]


def test_call_of_names_the_call_a_reused_id_result_answers() -> None:
    history = _reused_ids()
    assert call_of(history[4], history) == {"name": "read", "args": {"path": "b.py"}}
    assert call_of(history[2], history) == {"name": "read", "args": {"path": "a.py"}}


def test_build_index_names_each_result_of_a_reused_id() -> None:
    history = _reused_ids()
    index = build_index(history, 2000)
    lines = index.splitlines()
    a_line = next(line for line in lines if "a.py" in line)
    b_line = next(line for line in lines if "b.py" in line)
    assert a_line.endswith(f"ref={message_ref(history[2])}")
    assert b_line.endswith(f"ref={message_ref(history[4])}")


def test_recall_describes_the_call_a_reused_id_result_answers() -> None:
    history = _reused_ids()
    tool: Any = create_recall_tool()
    runtime = SimpleNamespace(state={"messages": history}, store=None, config={})
    page = tool.func(message_ref(history[4]), runtime)
    first = page.splitlines()[0]
    assert "tool result of read" in first
    assert "b.py" in first and "a.py" not in first


def test_the_archive_describes_the_call_a_reused_id_result_answers() -> None:
    history = _reused_ids()
    refs = [message_ref(m) for m in history]
    after = [history[0], HumanMessage(f"see ref={refs[2]} and ref={refs[4]}")]
    records = plan_records(history, after)
    assert records[refs[4]]["call"] == {"name": "read", "args": {"path": "b.py"}}
    assert records[refs[2]]["call"] == {"name": "read", "args": {"path": "a.py"}}


def test_message_text_reads_output_and_input_text_blocks() -> None:
    ai = AIMessage([{"type": "output_text", "text": "done", "annotations": []}])
    human = HumanMessage([{"type": "input_text", "text": "do it"}, {"type": "text", "text": "now"}])
    assert message_text(ai) == "done"
    assert message_text(human) == "do it\nnow"


def test_the_pruner_cuts_an_old_output_text() -> None:
    history: list[BaseMessage] = [
        HumanMessage("task"),
        AIMessage([{"type": "output_text", "text": LONG, "annotations": [], "id": "msg_1"}]),
        HumanMessage("thanks"),
    ]
    out = Pruner(tail_budget=10).invoke(history)
    block = out[1].content[0]
    assert isinstance(block, dict)
    assert block["type"] == "output_text" and block["id"] == "msg_1"
    assert "chars trimmed" in block["text"]
    assert len(block["text"]) <= Pruner().settings.assistant_text_limit
    assert block["text"].startswith(LONG[:100])
    assert history[1].content[0]["text"] == LONG  # type: ignore[index]


def test_truncation_cuts_an_output_text_rather_than_replacing_it() -> None:
    history: list[BaseMessage] = [
        HumanMessage("task"),
        AIMessage([{"type": "output_text", "text": LONG, "annotations": []}]),
    ]
    out = hard_truncate(history, threshold=800, head_count=1)
    block = out[-1].content[0]
    assert isinstance(block, dict) and block["type"] == "output_text"
    assert block["text"].startswith(LONG[:100])
    assert "chars trimmed" in block["text"]


# Parity with langchain-core's block translators, on what both read: the texts
# and the tool calls (ids, names, arguments).

_names = st.sampled_from(["read", "write", "grep"])
_args = st.dictionaries(st.sampled_from(["path", "query", "n"]), st.text(max_size=20), max_size=3)
_texts = st.lists(st.text(min_size=1, max_size=30), min_size=0, max_size=3)


def _core_view(message: AIMessage) -> tuple[list[str], dict[str, tuple[str, Any]]]:
    blocks = message.content_blocks
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    calls = {b["id"]: (b["name"], b["args"]) for b in blocks if b["type"] == "tool_call"}
    return texts, calls


def _our_view(message: AIMessage) -> tuple[list[str], dict[str, tuple[str, Any]]]:
    read = anatomy.read(message)
    return [text for _, text in read.texts], read.call_index()


@settings(max_examples=60, deadline=None)
@given(
    texts=_texts,
    calls=st.lists(st.tuples(_names, _args), max_size=3),
    provider=st.sampled_from(["anthropic", "openai", "v1"]),
    listed=st.booleans(),
)
def test_anatomy_agrees_with_content_blocks(
    texts: list[str], calls: list[tuple[str, dict[str, str]]], provider: str, listed: bool
) -> None:
    content: list[Any] = [{"type": "text", "text": t} for t in texts]
    tool_calls = [
        {"id": f"c{i}", "name": name, "args": args} for i, (name, args) in enumerate(calls)
    ]
    for call in tool_calls:
        if provider == "anthropic":
            block = {"type": "tool_use", "id": call["id"], "name": call["name"]}
            content.append({**block, "input": call["args"]})
        elif provider == "openai":
            block = {"type": "function_call", "call_id": call["id"], "name": call["name"]}
            content.append({**block, "arguments": json.dumps(call["args"])})
        else:
            content.append({"type": "tool_call", **call})
    if provider == "openai":
        listed = True  # the translator reads Responses calls from tool_calls alone
    metadata = {} if provider == "v1" else {"model_provider": provider}
    message = AIMessage(
        content, tool_calls=tool_calls if listed else [], response_metadata=metadata
    )
    assert _our_view(message) == _core_view(message)


def test_anatomy_agrees_with_content_blocks_for_anthropic_and_openai_examples() -> None:
    anthropic = AIMessage(
        [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
        ],
        response_metadata={"model_provider": "anthropic"},
    )
    openai = AIMessage(
        [
            {"type": "text", "text": "reading", "annotations": []},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p": 1}'},
        ],
        tool_calls=[{"id": "c1", "name": "read", "args": {"p": 1}}],
        response_metadata={"model_provider": "openai"},
    )
    for message in (anthropic, openai):
        assert _our_view(message) == _core_view(message)
        assert _our_view(message)[1]  # a call was read


# The memo.


def test_an_unchanged_message_is_read_once() -> None:
    message = AIMessage(
        [{"type": "text", "text": "hi"}],
        tool_calls=[{"id": "c1", "name": "read", "args": {"path": "a"}}],
    )
    before = anatomy.build_count()
    first = anatomy.read(message)
    countable_parts(message)
    call_ids(message)
    message_text(message)
    assert anatomy.read(message) is first
    assert anatomy.build_count() == before + 1


def test_the_memo_keeps_no_message_alive_and_a_rebuilt_entry_stays() -> None:
    import gc

    kept = AIMessage([{"type": "text", "text": "kept"}])
    gone = AIMessage([{"type": "text", "text": "gone"}])
    anatomy.read(kept)
    anatomy.read(gone)
    key = id(gone)
    assert key in anatomy._memo
    del gone
    gc.collect()
    assert key not in anatomy._memo
    # An edit in place rebuilds the entry: the one it replaces takes nothing with it.
    kept.content[0]["text"] = "edited"  # type: ignore[index]
    rebuilt = anatomy.read(kept)
    gc.collect()
    assert anatomy._memo[id(kept)].anatomy is rebuilt
    assert anatomy.read(kept) is rebuilt


def test_an_edit_in_place_is_seen() -> None:
    message = AIMessage(
        [{"type": "text", "text": "hi"}],
        tool_calls=[{"id": "c1", "name": "read", "args": {"path": "a"}}],
    )
    assert message_text(message) == "hi"
    message.content.append({"type": "output_text", "text": "more"})  # type: ignore[union-attr]
    assert message_text(message) == "hi\nmore"
    message.content[0]["text"] = "hello"  # type: ignore[index]
    assert message_text(message) == "hello\nmore"
    message.tool_calls[0]["args"]["path"] = "b"
    assert call_index(message) == {"c1": ("read", {"path": "b"})}
    assert "b" in "".join(countable_parts(message)[0])


def test_a_new_object_with_the_same_id_is_read_anew() -> None:
    reads = [message_text(HumanMessage(f"text {i}")) for i in range(50)]
    assert reads == [f"text {i}" for i in range(50)]


# Every reader agrees with the anatomy, for messages of every format.

_block = st.one_of(
    st.text(max_size=10),
    st.builds(
        lambda t, k: {"type": k, "text": t},
        st.text(max_size=10),
        st.sampled_from(["text", "input_text", "output_text", "text-plain"]),
    ),
    st.builds(lambda: {"type": "image", "url": "http://x/y.png"}),
    st.builds(lambda: {"type": "file", "file_id": "f1"}),
    st.builds(
        lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, st.text(max_size=10)
    ),
    st.builds(
        lambda i, a: {"type": "tool_use", "id": i, "name": "read", "input": a},
        st.sampled_from(["u1", "u2", ""]),
        _args,
    ),
    st.builds(
        lambda i, a: {"type": "function_call", "call_id": i, "name": "g", "arguments": a},
        st.sampled_from(["f1", "f2"]),
        st.text(max_size=10),
    ),
    st.builds(
        lambda i, t: {"type": "tool_result", "tool_use_id": i, "content": t},
        st.sampled_from(["u1", "r2"]),
        st.text(max_size=10),
    ),
    st.builds(
        lambda i, t: {"type": "function_call_output", "call_id": i, "output": t},
        st.sampled_from(["f1", "r3"]),
        st.text(max_size=10),
    ),
)
_content = st.one_of(st.text(max_size=20), st.lists(_block, max_size=5))


@st.composite
def _messages(draw: st.DrawFn) -> BaseMessage:
    content = draw(_content)
    kind = draw(st.sampled_from(["human", "ai", "tool", "system"]))
    if kind == "human":
        return HumanMessage(content)
    if kind == "system":
        return SystemMessage(content)
    if kind == "tool":
        return ToolMessage(content, tool_call_id=draw(st.sampled_from(["u1", "c1", ""])))
    calls = [
        {"id": i, "name": "read", "args": a}
        for i, a in draw(
            st.lists(st.tuples(st.sampled_from(["c1", "u1", "c2"]), _args), max_size=2)
        )
    ]
    raw = [
        {"id": i, "type": "function", "function": {"name": "x", "arguments": "{}"}}
        for i in draw(st.lists(st.sampled_from(["k1", "c1"]), max_size=2))
    ]
    kwargs: dict[str, Any] = {"tool_calls": raw} if raw else {}
    if draw(st.booleans()):  # a legacy call, or Gemini's copy of the last listed call
        kwargs["function_call"] = {"name": draw(st.sampled_from(["read", "x"])), "arguments": "{}"}
    return AIMessage(content, tool_calls=calls, additional_kwargs=kwargs)


@settings(max_examples=200, deadline=None)
@given(message=_messages())
def test_every_reader_agrees_with_the_anatomy(message: BaseMessage) -> None:
    read = anatomy.read(message)
    texts, fixed = countable_parts(message)
    counted = "\x00".join(texts)
    for _, text in read.texts:
        assert text in counted
    assert message_text(message) == read.text
    called = {c.id for c in read.calls}
    assert set(call_ids(message)) <= called
    assert set(call_index(message)) <= called
    for cid in result_ids(message):
        assert cid in {r.call_id for r in read.results}
    assert fixed == read.fixed >= read.images * 1600 + read.media * 3000
    if isinstance(message, AIMessage):
        assert set(call_ids(message)) == {c.id for c in read.calls if c.id}
        legacy = 0 if anatomy.legacy_call(message) is None else 1
        listed = len(message.tool_calls) + len(message.invalid_tool_calls)
        assert len(read.call_texts) == listed + legacy


def test_one_pass_reads_each_message_once_and_edits_after_it_are_seen() -> None:
    message = HumanMessage([{"type": "text", "text": "hi"}])
    with anatomy.one_pass():
        first = anatomy.read(message)
        assert anatomy.read(message) is first
        with anatomy.one_pass():  # nested: the outer pass
            assert anatomy.read(message) is first
    message.content[0]["text"] = "edited"  # type: ignore[index]
    assert message_text(message) == "edited"


@pytest.mark.parametrize("model", [None, "digest"])
def test_turn_by_turn_each_message_is_parsed_once(model: str | None) -> None:
    # Issue 18: one reading of a message. Over a real transcript replayed turn by
    # turn, with pruning, truncation and summaries happening, no turn builds the
    # anatomy of a message an earlier turn read (and that is unchanged since), and
    # a message new to the turn is built at most once.
    path = Path(__file__).parents[1] / "data" / "transcripts" / "aider_afi-core_gpt4o.json"
    messages = [as_blocks(m) for m in load_transcript(path)[0]]
    pipeline = ContextPipeline(threshold=6000, tail_budget=1500, model=DIGEST if model else None)
    carried = None
    start = 0
    stages: set[str] = set()
    for end in request_ends(messages):
        history = messages[:end]
        with recording_builds() as built:
            result = pipeline.compress(history, carried_summary=carried)
        carried = result.carried_summary
        stages.update(result.report.stages)
        old = {id(m) for m in history[:start]}
        new = [id(m) for m in built if id(m) not in old]
        assert not [m for m in built if id(m) in old], f"turn at {end}: an old message re-read"
        fresh = {id(m) for m in history[start:]}
        assert len([i for i in new if i in fresh]) == len({i for i in new if i in fresh})
        start = end
    assert "prune" in stages and ({"truncate", "condense"} & stages)
