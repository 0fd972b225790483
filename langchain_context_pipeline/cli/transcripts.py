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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.load import dumpd
from langchain_core.messages import (
    BaseMessage,
    ChatMessage,
    convert_to_openai_messages,
    messages_to_dict,
)

from langchain_context_pipeline.cli._documents import TranscriptFormat, parse_document
from langchain_context_pipeline.cli.transcript_errors import TranscriptError
from langchain_context_pipeline.messages.anatomy import legacy_call

__all__ = [
    "TranscriptError",
    "TranscriptFormat",
    "dump_transcript",
    "load_transcript",
    "parse_transcript",
]

_FORMATS: tuple[TranscriptFormat, ...] = get_args(TranscriptFormat)
# The roles a ChatMessage may have to be written in an OpenAI layout (with
# LangChain's short names, which convert_to_messages reads back as well).
_SURROGATE = re.compile("[\ud800-\udfff]")
_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function", "human", "ai")


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
    return parse_transcript(data, source=source)


def parse_transcript(
    text: str | bytes, *, source: str = "<string>"
) -> tuple[list[BaseMessage], TranscriptFormat]:
    """Parse a transcript held in a string (or UTF-8 bytes) and tell which layout it was in.

    The layout is recognised from the data: a JSON list of OpenAI message dicts,
    of ``messages_to_dict`` dicts or of ``dumpd`` objects (every item like the
    first); an object with a ``"messages"`` list (OpenAI or LangChain items); or
    JSONL, one OpenAI message object per line (blank lines are skipped).

    Args:
        text: The transcript's text, or its bytes (UTF-8; a leading byte-order
            mark is allowed), as read from a file or a pipe.
        source: The name used for the file in error messages.

    Returns:
        The messages, and the layout they were found in.

    Raises:
        TranscriptError: If ``text`` is empty, is not UTF-8, is not valid JSON or
            JSONL, or an item is not a message; the error names the line or
            message index.
    """
    if isinstance(text, bytes):
        text = _decode(text, source)
    try:
        return parse_document(text.removeprefix("\ufeff"))
    except TranscriptError as err:
        err.path = source
        raise


def dump_transcript(messages: Sequence[BaseMessage], fmt: TranscriptFormat) -> str:
    """Write messages as transcript text in the given layout.

    JSON layouts are indented by two spaces; JSONL has one compact object per
    line. Non-ASCII text is written as is, except lone surrogates (a JSON string
    may escape U+D800, which no UTF-8 text can hold): they are written escaped,
    so the text always encodes as UTF-8 and reads back the same. Reading the
    result with :func:`parse_transcript` gives back the same roles, content,
    tool calls and tool-call ids (the LangChain layouts give back equal messages).

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
        _escape_surrogates(json.dumps(item, ensure_ascii=False, separators=(",", ":"))) + "\n"
        for item in openai_messages
    )


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        problem = (
            f"expected UTF-8 text, got byte 0x{data[err.start]:02x} at byte offset {err.start}"
        )
        raise TranscriptError(problem, "UTF-8 text", source, f"line {line}") from err


# --- writing ---------------------------------------------------------------------------


def _json_document(value: Any) -> str:
    return _escape_surrogates(json.dumps(value, ensure_ascii=False, indent=2)) + "\n"


def _escape_surrogates(text: str) -> str:
    """Escape the lone surrogates in JSON text (U+D800 to U+DFFF, as JSON escapes).

    They can only stand inside JSON strings, where the escape reads back as the
    same character; written raw, they cannot be encoded as UTF-8.
    """
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _to_openai(message: BaseMessage, index: int) -> dict[str, Any]:
    if isinstance(message, ChatMessage) and message.role not in _OPENAI_ROLES:
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
    item = convert_to_openai_messages(message, text_format=text_format, include_id=True)
    # convert_to_openai_messages leaves out a legacy function call (OpenAI's
    # "function_call", answered by a "function" message), which reads back into
    # additional_kwargs; written without it, the call would be lost.
    legacy = legacy_call(message)
    if legacy is not None and "function_call" not in item:
        item["function_call"] = legacy
    return item
