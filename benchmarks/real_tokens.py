"""Overflows in real tokens: requests counted by real tokenizers and by the strategy's own count.

A request's real size is what a provider with that tokenizer charges for it, as
``tests/unit_tests/test_real_token_budget.py`` counts it: per message, the
tokenizer's count of the parts a provider sends
(:func:`langchain_context_pipeline.tokens.counters.countable_parts`: string content, text
and other blocks, tool calls with their JSON arguments), the fixed cost of media
blocks, and :data:`~langchain_context_pipeline.tokens.counters.MESSAGE_OVERHEAD_TOKENS`
(4) for the message's framing; plus :data:`REPLY_PRIMING` (3) per request. The
tokenizers are cl100k_base, o200k_base, Llama 3 and Qwen 3 from ``quicktok``
(offline, no download).

A strategy's own estimate is the counter it uses for its own decisions
(:attr:`benchmarks.strategies.Strategy.own_counter`), applied to the whole model
input it returns.

Each distinct message is tokenized once per tokenizer for the whole run: counts
are cached by the message's fingerprint (:func:`benchmarks.texts.fingerprint`:
role, content, tool calls, tool-call id: everything ``countable_parts`` reads),
across strategies, transcripts and windows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.texts import Fingerprint
from langchain_context_pipeline.tokens.counters import (
    MESSAGE_OVERHEAD_TOKENS,
    countable_parts,
    estimate_message_tokens,
)

REPLY_PRIMING = 3
"""Tokens a provider adds to every request to prime the reply (as the real-token tests)."""

TOKENIZERS = ("cl100k_base", "o200k_base", "llama3", "qwen3")
"""The real tokenizers of the full run (``quicktok`` encodings)."""

QUICK_TOKENIZERS = ("cl100k_base",)
"""The quick run counts with cl100k_base alone."""


OWN_COUNTERS: dict[str, Callable[[BaseMessage], int]] = {
    "estimate_tokens": estimate_message_tokens,
    "count_tokens_approximately": lambda message: count_tokens_approximately([message]),
}
"""Per-message form of each strategy's own counter (both are sums over messages). A
strategy may also count with one of the real tokenizers (its name in :data:`TOKENIZERS`),
read from the real counts."""


def load_tokenizers(names: Sequence[str]) -> dict[str, Callable[[str], int]]:
    """Return a text counter per ``quicktok`` encoding name.

    Raises:
        ImportError: when ``quicktok`` (the dev extra's ``quicktok-v1``) is not installed.
        ValueError: for an unknown encoding name.
    """
    import quicktok  # type: ignore[import-untyped, unused-ignore]

    def counter(encoding: Any) -> Callable[[str], int]:
        def count(text: str) -> int:
            return len(encoding.encode_ordinary(text))

        return count

    out: dict[str, Callable[[str], int]] = {}
    for name in names:
        try:
            encoding = quicktok.get_encoding(name)
        except Exception as exc:
            raise ValueError(f"quicktok has no encoding {name!r}: {exc}") from exc
        out[name] = counter(encoding)
    return out


class RealTokenCounter:
    """Counts requests by real tokenizers and by own estimates, each message once.

    One instance serves the whole run, so a message that several strategies send
    (the untouched history, most of all) is tokenized once per tokenizer.
    """

    def __init__(self, tokenizers: dict[str, Callable[[str], int]]) -> None:
        self.tokenizers = tokenizers
        self.names = tuple(tokenizers)
        self._real: dict[Fingerprint, tuple[int, ...]] = {}
        self._own: dict[tuple[str, Fingerprint, str | None], int] = {}
        self.tokenize_s = 0.0
        """Seconds spent in the tokenizers (distinct messages only)."""

    @property
    def distinct_messages(self) -> int:
        """How many distinct messages were tokenized."""
        return len(self._real)

    def _message(self, message: BaseMessage, fp: Fingerprint) -> tuple[int, ...]:
        counts = self._real.get(fp)
        if counts is None:
            start = time.perf_counter()
            texts, fixed = countable_parts(message)
            counts = tuple(
                sum(count(t) for t in texts) + fixed + MESSAGE_OVERHEAD_TOKENS
                for count in self.tokenizers.values()
            )
            self.tokenize_s += time.perf_counter() - start
            self._real[fp] = counts
        return counts

    def request(
        self, messages: Sequence[BaseMessage], fps: Sequence[Fingerprint]
    ) -> dict[str, int]:
        """Return the request's real tokens per tokenizer (framing and reply priming included).

        ``fps`` are the messages' fingerprints (:func:`benchmarks.texts.fingerprint`).
        """
        totals = [REPLY_PRIMING] * len(self.names)
        for message, fp in zip(messages, fps, strict=True):
            for i, n in enumerate(self._message(message, fp)):
                totals[i] += n
        return dict(zip(self.names, totals, strict=True))

    def own(
        self,
        counter: str,
        messages: Sequence[BaseMessage],
        fps: Sequence[Fingerprint],
    ) -> int:
        """Return the request's size by the strategy's own counter.

        ``counter``: a name of :data:`OWN_COUNTERS`, or of a tokenizer this counter
        counts with (its per-message counts, without the reply priming).

        Raises:
            KeyError: for a counter that is neither.
        """
        if counter in self.names:
            at = self.names.index(counter)
            return sum(self._message(m, fp)[at] for m, fp in zip(messages, fps, strict=True))
        count = OWN_COUNTERS[counter]
        total = 0
        for message, fp in zip(messages, fps, strict=True):
            # count_tokens_approximately also reads the message's name.
            key = (counter, fp, message.name)
            n = self._own.get(key)
            if n is None:
                n = count(message)
                self._own[key] = n
            total += n
        return total


@dataclass
class RealTokenStats:
    """Overflows of one strategy, by real tokenizers and by its own estimate."""

    own_counter: str | None = None
    own_overflows: int = 0
    own_max: int = 0
    overflows: dict[str, int] = field(default_factory=dict)
    """Requests above the window, per tokenizer."""
    max: dict[str, int] = field(default_factory=dict)
    """Largest request, per tokenizer."""

    def record(self, window: int, real: dict[str, int], own: int | None) -> None:
        """Count one request of ``real`` tokens (per tokenizer) and ``own`` estimated ones."""
        for name, n in real.items():
            self.overflows[name] = self.overflows.get(name, 0) + int(n > window)
            self.max[name] = max(self.max.get(name, 0), n)
        if own is not None:
            self.own_overflows += int(own > window)
            self.own_max = max(self.own_max, own)

    def add(self, other: RealTokenStats) -> None:
        """Add another transcript's figures (overflows summed, largest kept)."""
        self.own_counter = self.own_counter or other.own_counter
        self.own_overflows += other.own_overflows
        self.own_max = max(self.own_max, other.own_max)
        for name, n in other.overflows.items():
            self.overflows[name] = self.overflows.get(name, 0) + n
        for name, n in other.max.items():
            self.max[name] = max(self.max.get(name, 0), n)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "own_counter": self.own_counter,
            "own_overflows": self.own_overflows if self.own_counter else None,
            "own_max": self.own_max if self.own_counter else None,
            "overflows": dict(self.overflows),
            "max": dict(self.max),
        }
