"""What is measured on each model input: tokens, the cached prefix, tool pairs, retention."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from benchmarks.real_tokens import RealTokenStats
from benchmarks.recoverable import Recoverable
from langchain_context_pipeline.tokens.counters import estimate_message_tokens, message_text

CACHED_PRICE = 0.1
"""Price of a cached input token, relative to an uncached one."""

OUTPUT_PRICE = 4.0
"""Price of a summarizer output token, relative to an uncached input token."""

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


class Counter:
    """Token counts per message, cached by fingerprint, for one or two counters.

    Message objects are remembered for one request only (so a strategy's fresh
    copies are released); counts are remembered by what the message says.
    """

    def __init__(self, second: Callable[[Sequence[BaseMessage]], int] | None = None) -> None:
        self.second = second
        self._counts: dict[Fingerprint, tuple[int, int]] = {}
        self._last: dict[int, tuple[BaseMessage, Fingerprint]] = {}

    def measure(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[list[Fingerprint], list[int], list[int]]:
        """Return fingerprints and per-message tokens (estimate; second counter or zeros)."""
        current: dict[int, tuple[BaseMessage, Fingerprint]] = {}
        fps: list[Fingerprint] = []
        first: list[int] = []
        second: list[int] = []
        for message in messages:
            hit = self._last.get(id(message))
            fp = hit[1] if hit is not None and hit[0] is message else fingerprint(message)
            current[id(message)] = (message, fp)
            counts = self._counts.get(fp)
            if counts is None:
                counts = (
                    estimate_message_tokens(message),
                    self.second([message]) if self.second is not None else 0,
                )
                self._counts[fp] = counts
            fps.append(fp)
            first.append(counts[0])
            second.append(counts[1])
        self._last = current
        return fps, first, second


def common_prefix(a: Sequence[Fingerprint], b: Sequence[Fingerprint]) -> int:
    """Return how many leading messages two requests share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def check_pairs(messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """Return (orphan ToolMessages, unanswered tool calls) as a provider would judge them.

    A tool result must follow the assistant message that made its call, with only
    other tool results in between; every call of that message must be answered
    there.
    """
    orphans = 0
    unanswered = 0
    open_ids: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in open_ids:
                open_ids.discard(message.tool_call_id)
            else:
                orphans += 1
            continue
        unanswered += len(open_ids)
        open_ids = set()
        if isinstance(message, AIMessage):
            open_ids = {c["id"] for c in message.tool_calls if c.get("id")}
    return orphans, unanswered + len(open_ids)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def haystack(messages: Sequence[BaseMessage]) -> str:
    """Return everything the model reads: texts, tool-call names and argument values."""
    parts: list[str] = []
    for message in messages:
        parts.append(message_text(message))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                parts.append(call["name"])
                parts.extend(_strings(call["args"]))
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


@dataclass
class Retention:
    """What of the history is still in the final model input."""

    args_kept: int = 0
    args_total: int = 0
    users_kept: int = 0
    users_total: int = 0
    result_kept: int = 0
    result_total: int = 0

    def add(self, other: Retention) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @staticmethod
    def share(kept: int, total: int) -> float | None:
        return None if total == 0 else kept / total

    @property
    def args(self) -> float | None:
        return self.share(self.args_kept, self.args_total)

    @property
    def users(self) -> float | None:
        return self.share(self.users_kept, self.users_total)

    @property
    def result(self) -> float | None:
        return self.share(self.result_kept, self.result_total)

    @property
    def overall(self) -> float | None:
        """The mean of the three shares that apply."""
        parts = [x for x in (self.args, self.users, self.result) if x is not None]
        return sum(parts) / len(parts) if parts else None


def retention(history: Sequence[BaseMessage], model_input: Sequence[BaseMessage]) -> Retention:
    """Measure what of ``history`` the final ``model_input`` still holds."""
    hay = haystack(model_input)
    args = arg_items(history)
    users = user_items(history)
    result = latest_result(history)
    return Retention(
        args_kept=sum(1 for a in args if a in hay),
        args_total=len(args),
        users_kept=sum(1 for u in users if u in hay),
        users_total=len(users),
        result_kept=int(result is not None and result in hay),
        result_total=int(result is not None),
    )


@dataclass
class RunStats:
    """One strategy on one transcript at one window."""

    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    input_tokens_tiktoken: int = 0
    cached_tokens_tiktoken: int = 0
    summarizer_calls: int = 0
    summaries_written: int = 0
    summarizer_input: int = 0
    summarizer_output: int = 0
    summarizer_input_tiktoken: int = 0
    summarizer_output_tiktoken: int = 0
    requests_beyond: int = 0
    """Requests whose unmanaged history was larger than the window."""
    cost_beyond: float = 0.0
    """Effective cost (summarizer included) of the requests beyond the window."""
    overflows: int = 0
    max_input: int = 0
    orphans: int = 0
    unanswered: int = 0
    broken_requests: int = 0
    task_lost: int = 0
    errors: int = 0
    warnings: int = 0
    retention: Retention = field(default_factory=Retention)
    recoverable: Recoverable = field(default_factory=Recoverable)
    """What of the history the final request holds or can read back (``benchmarks.recoverable``)."""
    real: RealTokenStats = field(default_factory=RealTokenStats)
    """Overflows by real tokenizers and by the strategy's own estimate (``real_tokens``)."""
    overhead_us: list[float] = field(default_factory=list)
    fills: list[float] = field(default_factory=list)
    """cl100k size / window of each request whose history is over the window (``window``)."""
    next_kept: int = 0
    """Identifiers of the agent's next message still in the request (``window.next_step``)."""
    next_total: int = 0
    """Identifiers of the agent's next message found in its history."""

    def add(self, other: RunStats) -> None:
        for name in self.__dataclass_fields__:
            mine = getattr(self, name)
            theirs = getattr(other, name)
            if name == "max_input":
                self.max_input = max(mine, theirs)
            elif isinstance(mine, Retention | Recoverable | RealTokenStats):
                mine.add(theirs)
            elif isinstance(mine, list):
                mine.extend(theirs)
            else:
                setattr(self, name, mine + theirs)

    def cost(self, tiktoken: bool = False) -> float:
        """Effective cost in uncached-input-token units."""
        if tiktoken:
            inputs, cached = self.input_tokens_tiktoken, self.cached_tokens_tiktoken
            s_in, s_out = self.summarizer_input_tiktoken, self.summarizer_output_tiktoken
        else:
            inputs, cached = self.input_tokens, self.cached_tokens
            s_in, s_out = self.summarizer_input, self.summarizer_output
        return (inputs - cached) + CACHED_PRICE * cached + s_in + OUTPUT_PRICE * s_out


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the ``q`` quantile (0..1) by the nearest-rank method."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]
