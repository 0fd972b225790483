"""Reading a whole transcript document: JSON or JSONL, a list or a messages object.

The layout (:data:`TranscriptFormat`) is recognised from the data; each message
object in it is read by :mod:`langchain_context_pipeline.cli._messages`.

Example:
    >>> parse_document('{"messages": [{"role": "user", "content": "hi"}]}')[1]
    'messages_object'
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.cli._messages import KIND_NAMES, convert_item, item_kind
from langchain_context_pipeline.cli.transcript_errors import TranscriptError, json_type, keys_of

__all__ = ["TranscriptFormat", "parse_document"]

TranscriptFormat = Literal[
    "openai", "openai_jsonl", "messages_object", "langchain_dict", "langchain_dumpd"
]
"""The on-disk layouts of a transcript."""

_TOP_LEVEL = 'a JSON list of messages or an object with a "messages" list'
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


def parse_document(text: str) -> tuple[list[BaseMessage], TranscriptFormat]:
    """Parse a transcript's text (without a byte-order mark) and tell its layout.

    Args:
        text: The whole file.

    Returns:
        The messages and the layout they were found in.

    Raises:
        TranscriptError: Without a path; the caller adds it.
    """
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
        got = f"an object with keys {keys_of(value)}"
    else:
        got = json_type(value)
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
    first_kind = item_kind(items[0], "message 0")
    messages = []
    for index, item in enumerate(items):
        position = f"message {index}"
        kind = item_kind(item, position)
        if kind != first_kind:
            expected = f"{KIND_NAMES[first_kind]} like message 0"
            raise TranscriptError(
                f"expected {expected}, got {KIND_NAMES[kind]}", expected, position=position
            )
        messages.append(convert_item(item, kind, position))
    return messages, first_kind


def _parse_messages_object(items: Any) -> list[BaseMessage]:
    if not isinstance(items, list):
        expected = 'a list of messages under "messages"'
        raise TranscriptError(
            f"expected {expected}, got {json_type(items)}", expected, position='"messages"'
        )
    messages = []
    for index, item in enumerate(items):
        position = f"message {index}"
        messages.append(convert_item(item, item_kind(item, position), position))
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
        kind = item_kind(value, position)
        if kind != "openai":
            raise TranscriptError(
                f"expected {KIND_NAMES['openai']}, got {KIND_NAMES[kind]}",
                KIND_NAMES["openai"],
                position=position,
            )
        messages.append(convert_item(value, kind, position))
    return messages
