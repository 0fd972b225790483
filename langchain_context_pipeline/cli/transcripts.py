"""Read and write saved conversation transcripts.

A transcript is a conversation saved to disk. Five layouts are read, and each is
written back the way it was found:

- ``openai``: a JSON list of OpenAI chat-completions messages (``role``,
  ``content``, assistant ``tool_calls``, tool ``tool_call_id``);
- ``openai_jsonl``: the same messages, one JSON object per line;
- ``messages_object``: a JSON object ``{"messages": [...]}`` (other keys are
  ignored on reading and not written);
- ``langchain_dict``: the output of ``langchain_core.messages.messages_to_dict``;
- ``langchain_dumpd``: the output of ``langchain_core.load.dumpd`` on a list of
  messages (only LangChain message classes are revived).

The two LangChain layouts keep every message field. The OpenAI layouts keep
roles, content, names, ids, tool calls and tool-call ids; provider-specific
extras (``additional_kwargs``, ``response_metadata``, a tool message's
``status``) do not survive a trip through them.

A mistake in a file raises :class:`TranscriptError`, whose message is one line
naming the file, the place and what was expected there.

Example:
    >>> text = '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]'
    >>> messages, fmt = parse_transcript(text)
    >>> fmt, [type(m).__name__ for m in messages]
    ('openai', ['HumanMessage', 'AIMessage'])
    >>> parse_transcript(dump_transcript(messages, "langchain_dict"))[1]
    'langchain_dict'
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.load import dumpd, load
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
    convert_to_messages,
    convert_to_openai_messages,
    messages_from_dict,
    messages_to_dict,
)
from pydantic import ValidationError

__all__ = [
    "TranscriptError",
    "TranscriptFormat",
    "dump_transcript",
    "load_transcript",
    "parse_transcript",
]

TranscriptFormat = Literal[
    "openai", "openai_jsonl", "messages_object", "langchain_dict", "langchain_dumpd"
]
"""The on-disk layouts of a transcript that this module reads and writes."""

_FORMATS: tuple[TranscriptFormat, ...] = get_args(TranscriptFormat)

# The layout of one message object inside a file.
_ItemKind = Literal["openai", "langchain_dict", "langchain_dumpd"]
_KIND_NAMES: dict[_ItemKind, str] = {
    "openai": "an OpenAI chat message object",
    "langchain_dict": 'a LangChain message dict ({"type": ..., "data": ...})',
    "langchain_dumpd": 'a serialized LangChain message ({"lc": 1, ...})',
}

_MESSAGE_OBJECT = 'a message object with a "role" or "type" key'
_TOP_LEVEL = 'a JSON list of messages or an object with a "messages" list'
_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# LangChain's short names, which convert_to_messages accepts as well.
_ROLE_ALIASES = ("human", "ai")
_LANGCHAIN_DICT_TYPES = (
    "human",
    "ai",
    "system",
    "chat",
    "function",
    "tool",
    "HumanMessageChunk",
    "AIMessageChunk",
    "SystemMessageChunk",
    "ChatMessageChunk",
    "FunctionMessageChunk",
    "ToolMessageChunk",
)
# Classes a dumpd transcript may revive; anything else (models, prompts, secrets)
# is refused, because a serialized object's kwargs are executable configuration.
_DUMPD_CLASSES: tuple[type[BaseMessage], ...] = (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
)
_DUMPD_CLASS_NAMES = frozenset(cls.__name__ for cls in _DUMPD_CLASSES)
# The exceptions langchain_core and pydantic raise on malformed message data.
_CONVERSION_ERRORS = (ValueError, TypeError, KeyError, AttributeError, NotImplementedError)
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")
_BRIEF_LIMIT = 60


class TranscriptError(ValueError):
    """A mistake in a transcript: the file cannot be read as a conversation.

    ``str(err)`` is one line: the path, the position when known and the problem,
    e.g. ``transcript.json: message 5: expected a message object with a "role"
    or "type" key, got a number``.

    Attributes:
        problem: What is wrong, without path or position.
        expected: What a valid transcript has at that place.
        path: The file (or the ``source`` given to :func:`parse_transcript`).
        position: Where in the file, e.g. ``"line 3"``, ``"message 5"`` (the
            0-based index in the list of messages) or ``"line 2 column 7"``;
            ``None`` when the problem concerns the whole file.
    """

    def __init__(
        self,
        problem: str,
        expected: str,
        path: str | None = None,
        position: str | None = None,
    ) -> None:
        """Create the error.

        Args:
            problem: What is wrong; line breaks are folded into spaces.
            expected: What a valid transcript has at that place.
            path: The file the problem is in.
            position: Where in the file.
        """
        self.problem = " ".join(problem.split())
        self.expected = expected
        self.path = path
        self.position = position
        super().__init__(self.problem)

    def __str__(self) -> str:
        """Return ``path: position: problem``, leaving out the parts that are unknown."""
        return ": ".join(part for part in (self.path, self.position, self.problem) if part)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with all four fields (the default would keep only the message)."""
        return (type(self), (self.problem, self.expected, self.path, self.position))


def load_transcript(path: str | os.PathLike[str]) -> tuple[list[BaseMessage], TranscriptFormat]:
    """Read a transcript file and tell which layout it was in.

    Args:
        path: The file to read; UTF-8 text (a leading byte-order mark is allowed).

    Returns:
        The messages, and the layout to pass to :func:`dump_transcript` to write
        them back the same way.

    Raises:
        TranscriptError: If the file cannot be read, is not UTF-8, or is not a
            transcript in one of the layouts of :data:`TranscriptFormat`.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     file = Path(folder, "chat.jsonl")
        ...     _ = file.write_text('{"role": "user", "content": "hi"}', encoding="utf-8")
        ...     load_transcript(file)[1]
        'openai_jsonl'
    """
    source = os.fspath(path)
    try:
        data = Path(source).read_bytes()
    except OSError as err:
        reason = err.strerror or str(err)
        raise TranscriptError(f"cannot read file: {reason}", "a readable file", source) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        problem = (
            f"expected UTF-8 text, got byte 0x{data[err.start]:02x} at byte offset {err.start}"
        )
        raise TranscriptError(problem, "UTF-8 text", source, f"line {line}") from err
    return parse_transcript(text, source=source)


def parse_transcript(
    text: str, *, source: str = "<string>"
) -> tuple[list[BaseMessage], TranscriptFormat]:
    """Parse a transcript held in a string and tell which layout it was in.

    The layout is recognised from the data: a JSON list of OpenAI message dicts,
    of ``messages_to_dict`` dicts or of ``dumpd`` objects (every item like the
    first); an object with a ``"messages"`` list (OpenAI or LangChain items); or
    JSONL, one OpenAI message object per line (blank lines are skipped).

    Args:
        text: The transcript's text.
        source: The name used for the file in error messages.

    Returns:
        The messages, and the layout they were found in.

    Raises:
        TranscriptError: If ``text`` is empty, is not valid JSON or JSONL, or an
            item is not a message; the error names the line or message index.
    """
    try:
        return _parse_text(text.removeprefix("\ufeff"))
    except TranscriptError as err:
        err.path = source
        raise


def dump_transcript(messages: Sequence[BaseMessage], fmt: TranscriptFormat) -> str:
    """Write messages as transcript text in the given layout.

    JSON layouts are indented by two spaces; JSONL has one compact object per
    line. Non-ASCII text is written as is. Reading the result with
    :func:`parse_transcript` gives back the same roles, content, tool calls and
    tool-call ids (the LangChain layouts give back equal messages).

    Args:
        messages: The conversation; it is not modified.
        fmt: The layout, usually the one :func:`load_transcript` returned.

    Returns:
        The text, ending with a newline.

    Raises:
        TypeError: If an item of ``messages`` is not a ``BaseMessage``.
        ValueError: If ``fmt`` is unknown; if an OpenAI layout is asked for a
            ``ChatMessage`` whose role OpenAI does not have; or if an empty
            conversation is to be written as JSONL (an empty file is not a
            transcript).
    """
    if fmt not in _FORMATS:
        msg = f"unknown transcript format {fmt!r}; expected one of {', '.join(_FORMATS)}"
        raise ValueError(msg)
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            msg = f"message {index}: expected a BaseMessage, got {type(message).__name__}"
            raise TypeError(msg)
    if fmt == "langchain_dict":
        return _json_document(messages_to_dict(messages))
    if fmt == "langchain_dumpd":
        return _json_document(dumpd(list(messages)))
    openai_messages = [_to_openai(message, index) for index, message in enumerate(messages)]
    if fmt == "openai":
        return _json_document(openai_messages)
    if fmt == "messages_object":
        return _json_document({"messages": openai_messages})
    if not openai_messages:
        msg = "an empty conversation cannot be written as JSONL: an empty file is not a transcript"
        raise ValueError(msg)
    return "".join(
        json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n"
        for item in openai_messages
    )


# --- writing ---------------------------------------------------------------------------


def _json_document(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def _to_openai(message: BaseMessage, index: int) -> dict[str, Any]:
    if isinstance(message, ChatMessage) and message.role not in _OPENAI_ROLES + _ROLE_ALIASES:
        msg = (
            f"message {index}: a ChatMessage with role {message.role!r} has no OpenAI form;"
            " write it as langchain_dict or langchain_dumpd"
        )
        raise ValueError(msg)
    # "string" would join a list of text blocks into one string, so list content
    # keeps its blocks and string content stays a string.
    text_format: Literal["string", "block"] = (
        "block" if isinstance(message.content, list) else "string"
    )
    return convert_to_openai_messages(message, text_format=text_format, include_id=True)


# --- reading: whole documents ------------------------------------------------------------


def _parse_text(text: str) -> tuple[list[BaseMessage], TranscriptFormat]:
    start = _skip_whitespace(text, 0)
    if start == len(text):
        raise TranscriptError(
            "expected a JSON or JSONL transcript, got an empty file",
            "a JSON or JSONL transcript",
            position="line 1",
        )
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as err:
        raise _json_error(err.msg, err.lineno, err.colno) from err
    except RecursionError as err:
        raise TranscriptError(
            "invalid JSON: nested too deeply", "valid JSON", position="top level"
        ) from err
    rest = _skip_whitespace(text, end)
    if rest < len(text):
        if "\n" in text[start:end]:
            # A multi-line document followed by more text is broken JSON, not JSONL.
            line = text.count("\n", 0, rest) + 1
            column = rest - text.rfind("\n", 0, rest)
            raise _json_error("extra data after the top-level value", line, column)
        return _parse_jsonl(text), "openai_jsonl"
    if isinstance(value, list):
        return _parse_list(value)
    if isinstance(value, dict):
        if "messages" in value:
            return _parse_messages_object(value["messages"]), "messages_object"
        if ("role" in value or "type" in value) and "\n" not in text[start:end]:
            # A JSONL file with a single message.
            return _parse_jsonl(text), "openai_jsonl"
        got = f"an object with keys {_keys(value)}"
    else:
        got = _json_type(value)
    raise TranscriptError(f"expected {_TOP_LEVEL}, got {got}", _TOP_LEVEL, position="top level")


def _skip_whitespace(text: str, position: int) -> int:
    match = _JSON_WHITESPACE.match(text, position)
    return match.end() if match else position


def _json_error(detail: str, line: int, column: int) -> TranscriptError:
    return TranscriptError(
        f"invalid JSON: {detail}", "valid JSON", position=f"line {line} column {column}"
    )


def _parse_list(items: list[Any]) -> tuple[list[BaseMessage], TranscriptFormat]:
    if not items:
        return [], "openai"
    first_kind = _item_kind(items[0], "message 0")
    messages = []
    for index, item in enumerate(items):
        position = f"message {index}"
        kind = _item_kind(item, position)
        if kind != first_kind:
            expected = f"{_KIND_NAMES[first_kind]} like message 0"
            raise TranscriptError(
                f"expected {expected}, got {_KIND_NAMES[kind]}", expected, position=position
            )
        messages.append(_convert_item(item, kind, position))
    return messages, first_kind


def _parse_messages_object(items: Any) -> list[BaseMessage]:
    if not isinstance(items, list):
        expected = 'a list of messages under "messages"'
        raise TranscriptError(
            f"expected {expected}, got {_json_type(items)}", expected, position='"messages"'
        )
    messages = []
    for index, item in enumerate(items):
        position = f"message {index}"
        messages.append(_convert_item(item, _item_kind(item, position), position))
    return messages


def _parse_jsonl(text: str) -> list[BaseMessage]:
    messages = []
    # Not splitlines(): U+2028 and friends may stand unescaped inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        position = f"line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise _json_error(err.msg, number, err.colno) from err
        except RecursionError as err:
            raise TranscriptError(
                "invalid JSON: nested too deeply", "valid JSON", position=position
            ) from err
        if isinstance(value, dict) and "messages" in value:
            expected = "one message object per line"
            raise TranscriptError(
                f'expected {expected}, got a {{"messages": [...]}} record; a file of several'
                " such records is a dataset of conversations, not one transcript",
                expected,
                position=position,
            )
        kind = _item_kind(value, position)
        if kind != "openai":
            raise TranscriptError(
                f"expected {_KIND_NAMES['openai']}, got {_KIND_NAMES[kind]}",
                _KIND_NAMES["openai"],
                position=position,
            )
        messages.append(_convert_item(value, kind, position))
    return messages


# --- reading: one message ----------------------------------------------------------------


def _item_kind(item: Any, position: str) -> _ItemKind:
    if not isinstance(item, dict):
        got = _json_type(item)
    elif "lc" in item:
        return "langchain_dumpd"
    elif "data" in item and "type" in item and "role" not in item and "content" not in item:
        return "langchain_dict"
    elif "role" in item or "type" in item:
        return "openai"
    else:
        got = f"an object with keys {_keys(item)}"
    raise TranscriptError(
        f"expected {_MESSAGE_OBJECT}, got {got}", _MESSAGE_OBJECT, position=position
    )


def _convert_item(item: dict[str, Any], kind: _ItemKind, position: str) -> BaseMessage:
    if kind == "openai":
        item = _check_openai_item(item, position)
    elif kind == "langchain_dict":
        _check_langchain_dict(item, position)
    else:
        _check_dumpd(item, position)
    try:
        message = _revive(item, kind)
    except _CONVERSION_ERRORS as err:
        raise TranscriptError(
            f"invalid message: {_describe(err)}", _KIND_NAMES[kind], position=position
        ) from err
    if not isinstance(message, BaseMessage):
        raise TranscriptError(
            f"expected {_KIND_NAMES[kind]}, got {type(message).__name__} after loading",
            _KIND_NAMES[kind],
            position=position,
        )
    return message


def _revive(item: dict[str, Any], kind: _ItemKind) -> Any:
    if kind == "openai":
        return convert_to_messages([item])[0]
    if kind == "langchain_dict":
        return messages_from_dict([item])[0]
    with warnings.catch_warnings():
        # load() is marked beta and says so once per process; reviving a handful of
        # message classes is not the part of it that may change.
        warnings.filterwarnings("ignore", message=r".*`load` is in beta", category=Warning)
        return load(item, allowed_objects=_DUMPD_CLASSES)


def _check_openai_item(item: dict[str, Any], position: str) -> dict[str, Any]:
    """Check what convert_to_messages would misread or fail on obscurely.

    Returns:
        ``item``, or a shallow copy with ``"content": None`` added where an
        assistant message that only calls tools leaves it out.
    """

    def fail(problem: str, expected: str) -> TranscriptError:
        return TranscriptError(problem, expected, position=position)

    key = "role" if "role" in item else "type"
    role = item[key]
    roles = _OPENAI_ROLES + _ROLE_ALIASES
    if role not in roles:
        expected = f'a "{key}" of {", ".join(roles)}'
        raise fail(f"expected {expected}, got {_brief(role)}", expected)
    is_assistant = role in ("assistant", "ai")
    if "content" not in item and not is_assistant:
        raise fail(f'expected a "content" key in a "{role}" message', 'a "content" key')
    content = item.get("content")
    if not (content is None or isinstance(content, str) or _is_part_list(content)):
        expected = '"content" as a string, a list of content parts or null'
        raise fail(f"expected {expected}, got {_json_type(content)}", expected)
    if role == "tool" and not isinstance(item.get("tool_call_id"), str):
        expected = 'a "tool_call_id" string in a tool message'
        got = _json_type(item["tool_call_id"]) if "tool_call_id" in item else "no such key"
        raise fail(f"expected {expected}, got {got}", expected)
    if role == "function" and not isinstance(item.get("name"), str):
        expected = 'a "name" string in a function message'
        raise fail(f"expected {expected}, got {_json_type(item.get('name'))}", expected)
    tool_calls = item.get("tool_calls")
    if tool_calls is not None:
        if not is_assistant:
            expected = '"tool_calls" only in assistant messages'
            raise fail(f'expected {expected}, got them in a "{role}" message', expected)
        if not isinstance(tool_calls, list):
            expected = '"tool_calls" as a list'
            raise fail(f"expected {expected}, got {_json_type(tool_calls)}", expected)
        for index, call in enumerate(tool_calls):
            problem = _tool_call_problem(call)
            if problem is not None:
                expected = "a tool call with an id, a name and arguments as a JSON object"
                raise fail(f"tool call {index}: {problem}", expected)
    if "content" not in item:
        return {**item, "content": None}
    return item


def _is_part_list(content: Any) -> bool:
    return isinstance(content, list) and all(isinstance(part, (str, dict)) for part in content)


def _tool_call_problem(call: Any) -> str | None:
    """Say what is wrong with one tool call (OpenAI or LangChain shape), if anything."""
    if not isinstance(call, dict):
        return f"expected an object, got {_json_type(call)}"
    if "function" in call:
        function = call["function"]
        if not isinstance(function, dict):
            return f'expected "function" as an object, got {_json_type(function)}'
        name, args, args_key = function.get("name"), function.get("arguments"), "arguments"
    else:
        name, args, args_key = call.get("name"), call.get("args"), "args"
    if not isinstance(name, str):
        return f'expected a "name" string, got {_json_type(name)}'
    if "id" not in call or not (call["id"] is None or isinstance(call["id"], str)):
        got = _json_type(call["id"]) if "id" in call else "no such key"
        return f'expected an "id" string, got {got}'
    if isinstance(args, str) and args_key == "arguments":
        try:
            args = json.loads(args, strict=False)
        except json.JSONDecodeError as err:
            return f'"arguments" is not valid JSON: {err}'
    if not isinstance(args, dict):
        expected = (
            "a JSON object or a string holding one" if args_key == "arguments" else "an object"
        )
        return f'expected "{args_key}" as {expected}, got {_json_type(args)}'
    return None


def _check_langchain_dict(item: dict[str, Any], position: str) -> None:
    message_type, data = item["type"], item["data"]
    if message_type not in _LANGCHAIN_DICT_TYPES:
        expected = f'a "type" of {", ".join(_LANGCHAIN_DICT_TYPES)}'
        raise TranscriptError(
            f"expected {expected}, got {_brief(message_type)}", expected, position=position
        )
    if not isinstance(data, dict):
        expected = '"data" as an object'
        raise TranscriptError(
            f"expected {expected}, got {_json_type(data)}", expected, position=position
        )


def _check_dumpd(item: dict[str, Any], position: str) -> None:
    # load() enforces the allowlist itself; this check gives a plainer message first.
    expected = "a serialized LangChain message class"
    if item.get("type") != "constructor":
        raise TranscriptError(
            f'expected {expected} ("type": "constructor"), got "type": {_brief(item.get("type"))}',
            expected,
            position=position,
        )
    class_path = item.get("id")
    class_name = class_path[-1] if isinstance(class_path, list) and class_path else None
    if class_name not in _DUMPD_CLASS_NAMES:
        got = ".".join(map(str, class_path)) if isinstance(class_path, list) else class_path
        raise TranscriptError(
            f"expected {expected} ({', '.join(sorted(_DUMPD_CLASS_NAMES))}), got {_brief(got)}",
            expected,
            position=position,
        )


# --- error text --------------------------------------------------------------------------


def _describe(err: BaseException) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    if isinstance(err, KeyError):
        return f"missing key {err.args[0]!r}" if err.args else "missing key"
    # langchain_core appends advice ("For troubleshooting, visit ...") after the
    # first sentence; the first sentence is the diagnosis.
    lines = str(err).strip().splitlines()
    return lines[0].split(". ", 1)[0] if lines else type(err).__name__


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _brief(value: Any) -> str:
    """Show a small JSON value as it appears in the file, cut to a readable length."""
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        return _json_type(value)
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _BRIEF_LIMIT else text[: _BRIEF_LIMIT - 1] + "…"


def _keys(value: dict[str, Any]) -> str:
    if not value:
        return "(none)"
    names = [_brief(str(key)) for key in list(value)[:5]]
    return ", ".join(names) + (", …" if len(value) > 5 else "")
