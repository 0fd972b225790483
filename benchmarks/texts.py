"""What a provider and a model see of messages: fingerprints, the haystack, the items looked for.

The lowest module of the benchmark's measures: :mod:`benchmarks.metrics`,
:mod:`benchmarks.real_tokens` and :mod:`benchmarks.recoverable` build on it and
it imports none of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_pipeline.tokens.counters import message_text

ARG_KEYS = ("path", "file_path", "command", "cmd", "query", "pattern", "url")
"""Tool-call arguments whose values retention looks for."""

ARG_CHARS = 60
USER_CHARS = 80
RESULT_CHARS = 80

TEST_RESULT = re.compile(
    r"\b\d+ (?:passed|failed|errors?|tests? (?:passed|failed))\b(?![.\w])"
    r"|^(?:OK|FAILED|PASSED|FAIL|PASS)\b"
    r"|\bRan \d+ tests?\b"
    r"|^Traceback \(most recent call last\)"
    r"|^[A-Za-z_.]*(?:Error|Exception)\b"
    r"|(?:^|\s)(?:error|fatal): \S"
    r"|\bBUILD (?:SUCCESS|SUCCESSFUL|SUCCEEDED|FAILED|FAILURE)\b"
    r"|\btests? (?:passed|failed)\b",
    re.MULTILINE,
)
"""A test runner's or build tool's verdict (pytest, unittest, tracebacks, compilers)."""

Fingerprint = tuple[str, str, str, str]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def fingerprint(message: BaseMessage) -> Fingerprint:
    """Return what a provider sees of a message: role, content, tool calls, call id.

    Ids and metadata are not sent to the model, so they do not count.
    """
    content = message.content if isinstance(message.content, str) else _dumps(message.content)
    calls = ""
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls = _dumps(
            [[c["name"], c["args"], c.get("id")] for c in message.tool_calls]
            + [[c.get("name"), c.get("args"), c.get("id")] for c in message.invalid_tool_calls]
        )
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else ""
    return (message.type, content, calls, call_id)


def strings(value: Any) -> Iterator[str]:
    """Every string inside ``value`` (dicts' values, lists and tuples, recursively)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def haystack(messages: Sequence[BaseMessage]) -> str:
    """Return everything the model reads: texts, tool-call names and argument values."""
    parts: list[str] = []
    for message in messages:
        parts.append(message_text(message))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                parts.append(call["name"])
                parts.extend(strings(call["args"]))
            for bad in message.invalid_tool_calls:
                parts.append(str(bad.get("args") or ""))
    return "\n\x00\n".join(parts)


def arg_items(history: Sequence[BaseMessage]) -> list[str]:
    """Paths, commands, queries and URLs of every tool call, cut to 60 chars, deduplicated."""
    seen: dict[str, None] = {}
    for message in history:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            args = call.get("args")
            if not isinstance(args, dict):
                continue
            for key in ARG_KEYS:
                value = args.get(key)
                if isinstance(value, str) and value.strip():
                    seen[value.strip()[:ARG_CHARS]] = None
    return list(seen)


def user_items(history: Sequence[BaseMessage]) -> list[str]:
    """The first 80 chars of each user message, deduplicated."""
    seen: dict[str, None] = {}
    for message in history:
        if isinstance(message, HumanMessage):
            text = message_text(message).strip()[:USER_CHARS]
            if text:
                seen[text] = None
    return list(seen)


def latest_result(history: Sequence[BaseMessage]) -> str | None:
    """The verdict line of the latest test or build output (its last matching line), if any.

    Outputs are tool results where the agent has native tool calls, and user
    messages after the task (observations) where it parses actions from text.
    """
    native = any(isinstance(m, ToolMessage) for m in history)
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if native:
            if not isinstance(message, ToolMessage):
                continue
        elif not isinstance(message, HumanMessage) or index < 2:
            continue
        text = message_text(message)
        verdicts = [line.strip() for line in text.splitlines() if TEST_RESULT.search(line)]
        if verdicts:
            return verdicts[-1][:RESULT_CHARS]
    return None


def task_text(history: Sequence[BaseMessage]) -> str | None:
    """The first 80 chars of the first user message: the task."""
    for message in history:
        if isinstance(message, HumanMessage):
            text = message_text(message).strip()[:USER_CHARS]
            return text or None
    return None
