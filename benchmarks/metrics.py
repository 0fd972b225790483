"""What is measured on each model input: tokens, the cached prefix, tool pairs, retention."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from benchmarks.real_tokens import RealTokenStats
from benchmarks.recoverable import Recoverable
from benchmarks.texts import Fingerprint, fingerprint
from langchain_context_pipeline.tokens.counters import estimate_message_tokens

CACHED_PRICE = 0.1
"""Price of a cached input token, relative to an uncached one."""

OUTPUT_PRICE = 4.0
"""Price of a summarizer output token, relative to an uncached input token."""


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
    recoverable: Recoverable = field(default_factory=Recoverable)
    """What of the history the final request holds (retention) or can read back
    (``benchmarks.recoverable``)."""
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
            elif isinstance(mine, Recoverable | RealTokenStats):
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
