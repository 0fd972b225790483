from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, get_args

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_pipeline.cli.transcripts import (
    TranscriptError,
    TranscriptFormat,
    dump_transcript,
    load_transcript,
    parse_transcript,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
FORMATS: tuple[TranscriptFormat, ...] = get_args(TranscriptFormat)

# name -> (messages, structured tool calls, native tool calls), from the corpus MANIFEST.md
BUNDLED = {
    "aider_afi-core_gpt4o.json": (141, 0, False),
    "langgraph_customer_support_swiss_airlines.json": (81, 26, True),
    "langgraph_sql_agent_chinook.json": (11, 4, True),
    "minisweagent_pvlib-1707_deepseek.json": (191, 95, True),
    "openhands_multiswebench_ponyc-4588_llama4.json": (101, 49, True),
    "openhands_swebv_astropy-14598_claude35.json": (67, 32, True),
    "sweagent_marshmallow-1867_function_calling.json": (24, 11, True),
    "taubench_airline_task2_gpt4o.json": (62, 27, True),
}


def signature(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """What every format must keep: role, content, name, tool calls, tool-call id."""
    return [
        (
            type(message).__name__,
            message.content,
            message.name,
            [
                (call["name"], call["args"], call["id"])
                for call in getattr(message, "tool_calls", [])
            ],
            getattr(message, "tool_call_id", None),
        )
        for message in messages
    ]


def assert_one_line_error(err: TranscriptError, path: Path, position: str | None) -> None:
    text = str(err)
    assert isinstance(err, ValueError)
    assert "\n" not in text and "\r" not in text
    assert text.startswith(f"{path}: ")
    assert err.path == str(path)
    assert err.position == position
    if position is not None:
        assert f": {position}: " in text
    assert err.expected


def load_error(path: Path) -> TranscriptError:
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    return info.value


# --- bundled transcripts -----------------------------------------------------------------


def test_bundled_transcripts_are_the_expected_files() -> None:
    assert sorted(path.name for path in DATA.glob("*.json")) == sorted(BUNDLED)
    assert (DATA / "NOTICE.md").is_file()


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_transcript_loads_with_intact_tool_pairs(name: str) -> None:
    n_messages, n_tool_calls, native = BUNDLED[name]
    messages, fmt = load_transcript(DATA / name)

    assert fmt == "openai"
    assert len(messages) == n_messages
    assert all(isinstance(message, BaseMessage) for message in messages)
    tool_calls = [
        call
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    ]
    assert len(tool_calls) == n_tool_calls
    tool_messages = [message for message in messages if isinstance(message, ToolMessage)]
    if not native:
        assert tool_messages == []
        return
    assert tool_messages
    seen_call_ids: set[str | None] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            seen_call_ids.update(call["id"] for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in seen_call_ids, message.tool_call_id


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_transcript_round_trips(name: str, fmt: TranscriptFormat, tmp_path: Path) -> None:
    messages, _ = load_transcript(DATA / name)
    path = tmp_path / f"out.{fmt}"
    path.write_text(dump_transcript(messages, fmt), encoding="utf-8")

    again, detected = load_transcript(path)

    assert detected == fmt
    assert signature(again) == signature(messages)
    if fmt.startswith("langchain"):
        assert again == messages


# --- a transcript with every feature -----------------------------------------------------

RICH = [
    {"role": "developer", "content": "Answer in French."},
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture? Ça va?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
        "name": "alice",
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "look", "arguments": '{"zoom": 2, "where": "ciel ☁"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": {}}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "look", "content": "a cloud"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "pong"}]},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Un nuage."}, {"type": "text", "text": "Fin."}],
    },
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_rich_transcript_round_trips(fmt: TranscriptFormat, tmp_path: Path) -> None:
    messages, _ = parse_transcript(json.dumps(RICH))
    text = dump_transcript(messages, fmt)
    path = tmp_path / "rich"
    path.write_text(text, encoding="utf-8")

    again, detected = load_transcript(path)

    assert detected == fmt
    assert signature(again) == signature(messages)
    assert again[0].additional_kwargs.get("__openai_role__") == "developer"
    assert again[2].content[1]["type"] == "image_url"  # type: ignore[index]
    assert "☁" in text  # written as is, not as \u escapes
    # parse(dump(parse(x))) == parse(x), applied a second time, changes nothing
    assert dump_transcript(again, fmt) == text


def test_rich_transcript_is_read_as_langchain_messages() -> None:
    messages, fmt = parse_transcript(json.dumps(RICH))

    assert fmt == "openai"
    assert [type(message) for message in messages] == [
        SystemMessage,
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        AIMessage,
    ]
    call = messages[3]
    assert isinstance(call, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in call.tool_calls] == [
        ("look", {"zoom": 2, "where": "ciel ☁"}, "call_1"),
        ("ping", {}, "call_2"),
    ]
    assert isinstance(messages[4], ToolMessage)
    assert messages[4].tool_call_id == "call_1"
    assert messages[4].name == "look"
    assert messages[2].name == "alice"


def test_layout_of_written_text() -> None:
    messages, _ = parse_transcript(json.dumps(RICH[:3]))

    jsonl = dump_transcript(messages, "openai_jsonl")
    lines = jsonl.splitlines()
    assert len(lines) == 3 and jsonl.endswith("\n")
    assert [json.loads(line)["role"] for line in lines] == ["developer", "system", "user"]
    assert ": " not in lines[0]  # compact
    assert dump_transcript(messages, "openai").startswith('[\n  {\n    "role": "developer"')
    assert json.loads(dump_transcript(messages, "messages_object"))["messages"][1] == {
        "role": "system",
        "content": "You are terse.",
    }


def test_dump_does_not_modify_the_messages() -> None:
    messages, _ = parse_transcript(json.dumps(RICH))
    before = [message.model_dump() for message in messages]

    for fmt in FORMATS:
        dump_transcript(messages, fmt)

    assert [message.model_dump() for message in messages] == before


def test_dump_rejects_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="unknown transcript format"):
        dump_transcript([HumanMessage("hi")], "yaml")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message 1"):
        dump_transcript([HumanMessage("hi"), {"role": "user"}], "openai")  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty conversation"):
        dump_transcript([], "openai_jsonl")
    with pytest.raises(ValueError, match="message 0: a ChatMessage with role 'critic'"):
        dump_transcript([ChatMessage(content="meh", role="critic")], "openai")
    # the LangChain layouts keep such a message
    critic = [ChatMessage(content="meh", role="critic")]
    assert parse_transcript(dump_transcript(critic, "langchain_dumpd"))[0] == critic


# --- format detection --------------------------------------------------------------------

USER = {"role": "user", "content": "hi"}
REPLY = {"role": "assistant", "content": "hello"}


def test_detects_openai_list() -> None:
    messages, fmt = parse_transcript(json.dumps([USER, REPLY]))
    assert fmt == "openai"
    assert [type(m) for m in messages] == [HumanMessage, AIMessage]


def test_detects_openai_jsonl_with_blank_lines_and_crlf() -> None:
    text = f"{json.dumps(USER)}\r\n\r\n{json.dumps(REPLY)}\r\n"
    messages, fmt = parse_transcript(text)
    assert fmt == "openai_jsonl"
    assert [m.content for m in messages] == ["hi", "hello"]


def test_detects_single_line_jsonl() -> None:
    messages, fmt = parse_transcript(json.dumps(USER) + "\n")
    assert (fmt, [m.content for m in messages]) == ("openai_jsonl", ["hi"])


def test_jsonl_keeps_unicode_line_separators_inside_strings() -> None:
    text = (
        json.dumps(USER) + "\n" + json.dumps({**REPLY, "content": "a\u2028b"}, ensure_ascii=False)
    )
    messages, fmt = parse_transcript(text)
    assert (fmt, messages[1].content) == ("openai_jsonl", "a\u2028b")


def test_detects_messages_object_with_openai_or_langchain_items() -> None:
    openai_items, fmt = parse_transcript(json.dumps({"messages": [USER, REPLY], "model": "x"}))
    assert fmt == "messages_object"
    langchain_items = json.loads(dump_transcript(openai_items, "langchain_dict"))
    again, fmt = parse_transcript(json.dumps({"messages": langchain_items}))
    assert fmt == "messages_object"
    assert again == openai_items


def test_detects_langchain_dict() -> None:
    text = json.dumps([{"type": "human", "data": {"content": "hi"}}])
    messages, fmt = parse_transcript(text)
    assert (fmt, messages) == ("langchain_dict", [HumanMessage("hi")])


def test_detects_langchain_dumpd() -> None:
    original = [
        HumanMessage("hi", id="m1"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
        ToolMessage("ok", tool_call_id="c1", artifact={"lc": 2}, status="error"),
    ]
    messages, fmt = parse_transcript(dump_transcript(original, "langchain_dumpd"))
    assert (fmt, messages) == ("langchain_dumpd", original)


def test_reads_a_byte_order_mark_and_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([USER]).encode())
    assert load_transcript(path)[1] == "openai"
    assert parse_transcript("[]") == ([], "openai")


# --- errors ------------------------------------------------------------------------------


def test_error_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    err = load_error(path)
    assert_one_line_error(err, path, None)
    assert "cannot read file" in str(err)


def test_error_directory_instead_of_file(tmp_path: Path) -> None:
    err = load_error(tmp_path)
    assert_one_line_error(err, tmp_path, None)
    assert "cannot read file" in str(err)


def test_error_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"role": "user",\n "content": "caf\xe9"}]')
    err = load_error(path)
    assert_one_line_error(err, path, "line 2")
    assert "UTF-8" in str(err) and "0xe9" in str(err)


def test_error_bad_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"role": "user" "content": "hi"}\n]', encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "line 2 column 19")
    assert "invalid JSON" in str(err)


def test_error_extra_data_after_a_json_document(tmp_path: Path) -> None:
    path = tmp_path / "extra.json"
    path.write_text('[\n  {"role": "user", "content": "hi"}\n]\n]\n', encoding="utf-8")
    assert_one_line_error(load_error(path), path, "line 4 column 1")


@pytest.mark.parametrize("text", ["", " \n\t\n"])
def test_error_empty_file(text: str, tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text, encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "line 1")
    assert "empty file" in str(err)


def test_error_top_level_number(tmp_path: Path) -> None:
    path = tmp_path / "number.json"
    path.write_text("42", encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "top level")
    assert str(err).endswith("got a number")


def test_error_top_level_object_without_messages(tmp_path: Path) -> None:
    path = tmp_path / "object.json"
    path.write_text('{\n "conversation": []\n}', encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "top level")
    assert '"conversation"' in str(err)


def test_error_non_object_item_names_its_index(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([USER, REPLY, "oops"]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 2")
    assert str(err).endswith('expected a message object with a "role" or "type" key, got a string')


def test_error_unknown_role_names_its_index(tmp_path: Path) -> None:
    path = tmp_path / "role.json"
    path.write_text(json.dumps([USER, {"role": "robot", "content": "beep"}]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 1")
    # langchain-core's own wording, which lists the roles it accepts
    assert "Unexpected message type: 'robot'. Use one of 'human'" in str(err)


@pytest.mark.parametrize(
    ("item", "detail"),
    [
        # langchain-core accepts these; a transcript must not
        ({"role": "remove", "content": "", "id": "m1"}, "RemoveMessage"),
        ({"role": "user", "content": 0}, '"content" as a string'),
        ({"role": "user", "content": False}, "got a boolean"),
        ({"role": "user", "content": "hi", "tool_calls": []}, "only in assistant messages"),
    ],
)
def test_error_what_langchain_core_accepts_but_a_transcript_must_not(
    item: dict[str, Any], detail: str, tmp_path: Path
) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([USER, item]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 1")
    assert detail in str(err)


def test_error_langchain_dict_remove_message(tmp_path: Path) -> None:
    path = tmp_path / "lc.json"
    path.write_text(json.dumps([{"type": "remove", "data": {"id": "m1", "content": ""}}]), "utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 0")
    assert "RemoveMessage" in str(err)


def test_error_from_langchain_core_is_short(tmp_path: Path) -> None:
    # convert_to_messages quotes the whole message dict when "content" is missing
    path = tmp_path / "long.json"
    path.write_text(json.dumps([{"role": "user", "name": "x" * 5000}]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 0")
    assert "'content'" in str(err) and len(err.problem) < 250


@pytest.mark.parametrize(
    ("tool_call", "detail"),
    [
        ({"id": "c", "function": {"name": "f", "arguments": 5}}, '"arguments"'),
        ({"id": "c", "function": {"name": "f", "arguments": "{oops"}}, "not valid JSON"),
        ({"id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}, "got an array"),
        ({"function": {"name": "f", "arguments": "{}"}}, '"id"'),
        ({"id": "c", "function": "f()"}, '"function" as an object'),
        ("f()", "tool call 0: expected an object"),
    ],
)
def test_error_bad_tool_calls_shape(tool_call: Any, detail: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.json"
    bad = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    path.write_text(json.dumps([USER, bad]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 1")
    assert "tool call 0" in str(err) and detail in str(err)


def test_error_tool_calls_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "calls.json"
    path.write_text(json.dumps([{**REPLY, "tool_calls": "f()"}]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 0")
    assert '"tool_calls" as a list' in str(err)


def test_error_tool_message_without_tool_call_id(tmp_path: Path) -> None:
    path = tmp_path / "tool.json"
    path.write_text(json.dumps([{"role": "tool", "content": "ok"}]), encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 0")
    assert '"tool_call_id"' in str(err)


def test_error_jsonl_bad_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        f'{json.dumps(USER)}\n{json.dumps(REPLY)}\n{{"role": "user", content: "x"}}\n',
        encoding="utf-8",
    )
    err = load_error(path)
    assert_one_line_error(err, path, "line 3 column 18")
    assert "invalid JSON" in str(err)


def test_error_jsonl_line_that_is_not_a_message(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(f"{json.dumps(USER)}\n\n[1]\n", encoding="utf-8")
    assert_one_line_error(load_error(path), path, "line 3")


def test_error_jsonl_of_several_conversations(tmp_path: Path) -> None:
    path = tmp_path / "dataset.jsonl"
    record = json.dumps({"messages": [USER, REPLY]})
    path.write_text(f"{record}\n{record}\n", encoding="utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "line 1")
    assert "dataset" in str(err)


def test_error_mixed_layouts_in_one_list(tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps([USER, {"type": "human", "data": {"content": "x"}}]), "utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 1")
    assert "like message 0" in str(err)


def test_error_langchain_dict_with_bad_content(tmp_path: Path) -> None:
    path = tmp_path / "lc.json"
    path.write_text(json.dumps([{"type": "human", "data": {"content": 5}}]), "utf-8")
    err = load_error(path)
    assert_one_line_error(err, path, "message 0")
    assert "content" in str(err)


@pytest.mark.parametrize(
    "item",
    [
        {"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {}},
        {"lc": 1, "type": "constructor", "id": ["evil", "AIMessage"], "kwargs": {"content": "x"}},
        {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]},
        {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "prompts", "prompt", "PromptTemplate"],
            "kwargs": {"template": "{x}", "input_variables": ["x"]},
        },
    ],
)
def test_error_dumpd_revives_only_messages(item: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "dumpd.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    assert_one_line_error(load_error(path), path, "message 0")


def test_parse_transcript_names_the_source() -> None:
    with pytest.raises(TranscriptError) as info:
        parse_transcript("[1]", source="chat.json")
    assert str(info.value).startswith("chat.json: message 0: ")
    with pytest.raises(TranscriptError) as info:
        parse_transcript("[1]")
    assert str(info.value).startswith("<string>: message 0: ")


def test_transcript_error_pickles_with_its_fields() -> None:
    err = TranscriptError("expected x, got y", "x", "a.json", "line 3")
    again = pickle.loads(pickle.dumps(err))
    assert (again.problem, again.expected, again.path, again.position) == (
        "expected x, got y",
        "x",
        "a.json",
        "line 3",
    )
    assert str(again) == "a.json: line 3: expected x, got y"
