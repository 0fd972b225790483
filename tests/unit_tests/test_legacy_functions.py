"""Legacy OpenAI functions: ``additional_kwargs["function_call"]`` answered by a ``FunctionMessage``.

The call has no id and the result only names the function, so the pair is read by
name (the nearest preceding open call of that name), counted, pruned, condensed,
truncated and written back like any other tool call and result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import quicktok
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_pipeline import DIGEST, ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.cli import main
from langchain_context_pipeline.cli.transcripts import dump_transcript, parse_transcript
from langchain_context_pipeline.messages.blocks import pair_results
from langchain_context_pipeline.messages.references import call_of, message_ref, render_original
from tests.support.strategies_shapes import broken_pairs

CL100K = quicktok.get_encoding("cl100k_base")


def call(name: str, **args: object) -> AIMessage:
    payload = {"name": name, "arguments": json.dumps(args)}
    return AIMessage("", additional_kwargs={"function_call": payload})


def legacy_conversation(turns: int = 6, size: int = 3000) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix the failing test in src/app.py."),
    ]
    for turn in range(turns):
        messages.append(call("read_file", path=f"src/f{turn}.py", note="y" * 400))
        messages.append(FunctionMessage(f"line {turn}\n" * (size // 7), name="read_file"))
    messages.append(HumanMessage("go on"))
    return messages


def adjacent_pairs_broken(messages: list[BaseMessage]) -> list[int]:
    """Positions where a legacy call is not followed by its result, or a result not preceded."""
    broken = []
    for index, message in enumerate(messages):
        if message.additional_kwargs.get("function_call"):
            after = messages[index + 1] if index + 1 < len(messages) else None
            if not isinstance(after, FunctionMessage):
                broken.append(index)
        if isinstance(message, FunctionMessage):
            before = messages[index - 1]
            if not (
                isinstance(before, AIMessage) and before.additional_kwargs.get("function_call")
            ):
                broken.append(index)
    return broken


def test_a_function_message_pairs_with_the_nearest_open_call_of_its_name() -> None:
    messages = [
        call("ls", path="a"),
        FunctionMessage("a listed", name="ls"),
        call("ls", path="b"),
        call("cat", path="c"),
        FunctionMessage("c read", name="cat"),
        FunctionMessage("b listed", name="ls"),
        FunctionMessage("nothing asked for this", name="grep"),
    ]
    assert pair_results(messages) == {1: [0], 4: [3], 5: [2]}
    assert call_of(messages[5], messages) == {"name": "ls", "args": {"path": "b"}}
    assert call_of(messages[6], messages) is None


def test_a_legacy_call_is_counted_with_its_arguments() -> None:
    big = call("write_file", path="src/app.py", content="print('hello')\n" * 300)
    assert estimate_tokens([big]) > estimate_tokens([AIMessage("")]) + 1000


@given(st.text(max_size=3000), st.text(min_size=1, max_size=40))
def test_the_estimate_of_a_legacy_call_is_not_under_its_real_tokens(text: str, name: str) -> None:
    message = AIMessage("", additional_kwargs={"function_call": {"name": name, "arguments": text}})
    real = len(CL100K.encode_ordinary(name)) + len(CL100K.encode_ordinary(text))
    assert estimate_tokens([message]) >= real


def test_the_pruner_cuts_legacy_arguments_and_briefs_function_results() -> None:
    messages = legacy_conversation()
    out = Pruner().invoke(messages)
    old_call, old_result = out[2], out[3]
    arguments = old_call.additional_kwargs["function_call"]["arguments"]
    assert len(arguments) < len(messages[2].additional_kwargs["function_call"]["arguments"])
    assert json.loads(arguments)["path"] == "src/f0.py"  # still JSON, short strings kept
    assert isinstance(old_result, FunctionMessage) and old_result.name == "read_file"
    assert len(old_result.text) <= 500 and "src/f0.py" in old_result.text
    assert f"ref={message_ref(messages[3])}" in old_result.text
    assert messages[3].text.startswith("line 0")  # the input is not modified
    # The original call stays recoverable, arguments and all.
    assert "y" * 400 in render_original(messages[2])


@pytest.mark.parametrize("threshold", [300, 1500, 3000, 6000])
def test_compression_never_splits_a_legacy_pair(threshold: int) -> None:
    messages = legacy_conversation()
    pipeline = ContextPipeline(threshold=threshold, model=DIGEST, head_count=2)
    out = pipeline.compress(messages).messages
    assert adjacent_pairs_broken(out) == []
    assert broken_pairs(out) == []
    assert estimate_tokens(out) <= threshold


def test_legacy_messages_do_not_share_a_reference() -> None:
    first, second = call("ls", path="a"), call("ls", path="b")
    assert message_ref(first) != message_ref(second)
    assert message_ref(FunctionMessage("x", name="ls")) != message_ref(
        FunctionMessage("x", name="cat")
    )
    # A ToolMessage's reference is as it was.
    assert message_ref(ToolMessage("x", tool_call_id="c1")) != message_ref(
        ToolMessage("x", tool_call_id="c2")
    )


@pytest.mark.parametrize("fmt", ["openai", "openai_jsonl", "messages_object"])
def test_openai_transcripts_keep_the_legacy_call(fmt: str) -> None:
    messages = legacy_conversation(turns=1, size=10)
    text = dump_transcript(messages, fmt)  # type: ignore[arg-type]
    back, _ = parse_transcript(text)
    assert (
        back[2].additional_kwargs["function_call"] == messages[2].additional_kwargs["function_call"]
    )
    assert isinstance(back[3], FunctionMessage) and back[3].name == "read_file"


def test_the_cli_keeps_a_legacy_call_below_the_threshold(tmp_path: Path) -> None:
    messages = legacy_conversation(turns=2, size=10)
    source = tmp_path / "legacy.json"
    source.write_text(dump_transcript(messages, "openai"), encoding="utf-8")
    target = tmp_path / "out.json"
    code = main(["compress", str(source), "--threshold", "32000", "-o", str(target)])
    assert code == 0
    written = json.loads(target.read_text(encoding="utf-8"))
    assert written[2]["function_call"] == messages[2].additional_kwargs["function_call"]
    assert written[3] == {"role": "function", "name": "read_file", "content": messages[3].text}
