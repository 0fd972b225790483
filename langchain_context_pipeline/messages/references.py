"""Short, stable references to what compaction replaced, and how they resolve.

Every brief, cut, summary and removal note names the originals it stands for
with a reference such as ``ref=ab12cd34`` (one message) or
``ref=ab12cd34..ef567890`` (a span, from its first to its last message). A
message's reference is derived from its id, or from its content when it has
none: the same history gives the same references, so a provider's prompt cache
keeps its prefix. A reference is only a name: it resolves against the messages
of one conversation (graph state) or that conversation's archive, never across
conversations (see :mod:`langchain_context_pipeline.integrations.recall`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, FunctionMessage, ToolMessage

from langchain_context_pipeline.messages.anatomy import (
    RESULT_MESSAGES,
    legacy_call,
    message_text,
    read,
    result_message_id,
)
from langchain_context_pipeline.messages.blocks import pair_results, paired_call
from langchain_context_pipeline.messages.marks import METADATA_KEY, pipeline_kind
from langchain_context_pipeline.messages.values import dumps

__all__ = [
    "REF_PATTERN",
    "RefIndex",
    "call_of",
    "content_ref",
    "find_refs",
    "format_ref",
    "message_ref",
    "own_span",
    "parse_ref",
    "render_message",
    "render_original",
    "resolve",
    "span_bounds",
    "span_ref",
    "stands_in",
    "written_text",
]

_LENGTH = 8
"""Hex digits of a message reference (32 bits: unique within any one conversation)."""

REF_PATTERN = re.compile(r"\bref=([0-9a-f]{8}(?:\.\.[0-9a-f]{8})?)\b")
"""How a reference appears in text: ``ref=`` and one or two 8-digit hex names."""

_BARE = re.compile(r"^([0-9a-f]{8})(?:\.\.([0-9a-f]{8}))?$")


def message_ref(message: BaseMessage) -> str:
    """Return the message's reference: 8 hex digits of a hash of its id or its content.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> message_ref(HumanMessage("hi", id="m1")) == message_ref(HumanMessage("yo", id="m1"))
        True
    """
    if message.id:
        return _digest(f"id:{message.id}")
    return content_ref(message)


def content_ref(message: BaseMessage) -> str:
    """Return the reference :func:`message_ref` gives ``message`` without its id.

    It names the message by what it says (its type, content, tool call id, tool calls
    or legacy function call), so it is the same after a reducer gives it an id.
    """
    extra: Any = message.tool_call_id if isinstance(message, ToolMessage) else None
    legacy = legacy_call(message)
    if isinstance(message, FunctionMessage):
        extra = ["function", message.name]
    if isinstance(message, AIMessage) and message.tool_calls:
        extra = message.tool_calls
    elif legacy is not None:
        extra = {"function_call": legacy}
    body = dumps([message.type, message.content, extra], sort_keys=True)
    return _digest(f"content:{body}")


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:_LENGTH]


def format_ref(ref: str) -> str:
    """Return ``ref`` as it is written in text: ``ref=ab12cd34``."""
    return f"ref={ref}"


def span_bounds(message: BaseMessage, ref: str | None = None) -> tuple[str, str]:
    """Return the first and last reference a message stands for.

    A summary or removal note the pipeline wrote stands for the span it names in
    its mark; any other message stands for itself (``ref``, when already known).
    """
    span = own_span(message)
    if span is not None:
        parsed = parse_ref(span)
        if parsed is not None:
            return parsed[0], parsed[1] or parsed[0]
    ref = ref or message_ref(message)
    return ref, ref


def own_span(message: BaseMessage) -> str | None:
    """Return the span a summary or removal note the pipeline wrote names in its mark."""
    if pipeline_kind(message) not in ("summary", "note"):
        return None
    meta = message.response_metadata.get(METADATA_KEY)
    span = meta.get("span") if isinstance(meta, dict) else None
    return span if isinstance(span, str) else None


def span_ref(messages: Sequence[BaseMessage]) -> str:
    """Return the reference of a run of messages: ``first..last`` (or one ref for one).

    A prior summary or note at either end extends the span to what it stood for,
    so the span resolves against the full history without that summary.
    """
    if not messages:
        raise ValueError("span_ref needs at least one message")
    first = span_bounds(messages[0])[0]
    last = span_bounds(messages[-1])[1]
    return first if first == last else f"{first}..{last}"


def parse_ref(text: str) -> tuple[str, str | None] | None:
    """Parse a reference as the agent gives it (``ab12cd34``, ``ref=ab12cd34..ef567890``).

    Returns ``(first, last)``, ``last`` being None for a single message, or None
    when ``text`` is not a reference.
    """
    cleaned = text.strip().strip("`'\"[]()").strip()
    if cleaned.startswith("ref="):
        cleaned = cleaned[4:]
    match = _BARE.match(cleaned.lower())
    if match is None:
        return None
    return match.group(1), match.group(2)


def written_text(message: BaseMessage) -> str:
    """Everything of a message a reference can be written in.

    Its text, its tool-call arguments and the results of its tool-result blocks
    (where the Pruner writes a brief).
    """
    text = message_text(message)
    if not isinstance(message.content, str):
        results = [r.text for r in read(message).results if r.position is not None]
        text = "\n".join([text, *results]) if results else text
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls: list[Any] = [c["args"] for c in message.tool_calls]
        calls += [c.get("args") for c in message.invalid_tool_calls]
        text += dumps(calls)
    return text


def stands_in(message: BaseMessage) -> bool:
    """Whether ``message`` stands in for an original: a brief, cut, summary or note.

    A brief or cut names its own original (the same reference as itself); a
    summary or note is marked by the pipeline.
    """
    if pipeline_kind(message) is not None:
        return True
    return format_ref(message_ref(message)) in written_text(message)


def find_refs(text: str) -> list[str]:
    """Return the references written in ``text``, in order, without repeats."""
    return list(dict.fromkeys(REF_PATTERN.findall(text)))


def resolve(ref: str, messages: Sequence[BaseMessage]) -> list[BaseMessage] | None:
    """Return the messages ``ref`` names within ``messages``, or None when it names none.

    A single reference gives its message (the last of that reference); a span gives
    every message from its first to its last (a summary or note that stands for one
    end counts as it). To resolve many references, index the messages once with
    :class:`RefIndex`.
    """
    return RefIndex(messages).resolve(ref)


class RefIndex:
    """The references of a list of messages, computed once, so each resolves in O(1).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> history = [HumanMessage("a", id="m1"), HumanMessage("b", id="m2")]
        >>> index = RefIndex(history)
        >>> index.resolve(message_ref(history[1])) == [history[1]]
        True
    """

    def __init__(self, messages: Sequence[BaseMessage]) -> None:
        """Index ``messages``: one reference per message and the ends of every span."""
        self.messages = messages
        self.refs: list[str] = []
        self._last: dict[str, int] = {}  # a message's reference -> its last index
        self._starts: dict[str, int] = {}  # a span's first reference -> its first index
        self._stops: dict[str, int] = {}  # a span's last reference -> its last index
        for index, message in enumerate(messages):
            ref = message_ref(message)
            self.refs.append(ref)
            self._last[ref] = index
            first, last = span_bounds(message, ref)
            self._starts.setdefault(first, index)
            self._stops[last] = index

    def bounds(self, ref: str) -> tuple[int, int] | None:
        """Return the first and last index ``ref`` names, or None when it names none."""
        parsed = parse_ref(ref)
        if parsed is None:
            return None
        first, last = parsed
        if last is None:
            found = self._last.get(first)
            return None if found is None else (found, found)
        start = self._starts.get(first)
        stop = self._stops.get(last)
        if start is None or stop is None or stop < start:
            return None
        return start, stop

    def resolve(self, ref: str) -> list[BaseMessage] | None:
        """Return the messages ``ref`` names, as :func:`resolve` does."""
        found = self.bounds(ref)
        return None if found is None else list(self.messages[found[0] : found[1] + 1])


def call_of(message: BaseMessage, messages: Iterable[BaseMessage]) -> dict[str, Any] | None:
    """Return ``{"name", "args"}`` of the call a ToolMessage or FunctionMessage answers.

    The call is the one :func:`~langchain_context_pipeline.messages.blocks.pair_results`
    pairs ``message`` with in ``messages`` (the nearest preceding open call of its
    id, so a reused id names its own call); a ``message`` that is not one of
    ``messages`` is paired as if it came after them.
    """
    if not isinstance(message, RESULT_MESSAGES):
        return None
    history = list(messages)
    index = next((i for i, m in enumerate(history) if m is message), None)
    if index is None:
        history.append(message)
        index = len(history) - 1
    history = history[: index + 1]
    found = paired_call(history, index, pair_results(history)).get(result_message_id(message))
    return None if found is None else {"name": found[0], "args": found[1]}


def _body(message: BaseMessage) -> str:
    """The message's full text: string content as is, blocks as text plus JSON."""
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        anatomy = read(message)
        texts = anatomy.text_positions
        others = [b for i, b in enumerate(content) if i not in texts]
        text = anatomy.text
        if others:
            extra = dumps(others)
            text = f"{text}\n[content blocks] {extra}" if text else f"[content blocks] {extra}"
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [
            {"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls
        ]
        text += ("\n" if text else "") + "[tool calls] " + dumps(calls)
    legacy = legacy_call(message)
    if legacy is not None:
        text += ("\n" if text else "") + "[function call] " + dumps(legacy)
    return text


def render_original(message: BaseMessage) -> str:
    """Return the text recall gives back for one message (its full original text).

    String content comes back byte for byte; block content as its text plus the
    other blocks as JSON; an assistant message's tool calls with their arguments.
    """
    return _body(message)


def render_span(messages: Sequence[BaseMessage]) -> str:
    """Return a span as a transcript: each message under a line naming its role and ref."""
    parts: list[str] = []
    for message in messages:
        role = message.type
        if isinstance(message, RESULT_MESSAGES) and message.name:
            role = f"{role} {message.name}"
        parts.append(f"--- {role} {format_ref(message_ref(message))} ---\n{_body(message)}")
    return "\n".join(parts)


render_message = render_original
"""Deprecated name of :func:`render_original` (one ``render_message`` was two functions)."""
