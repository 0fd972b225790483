"""The Meter: per-message token counts for one pass, with the counter's total as the judge."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.tokens.counters import (
    TokenCounter,
    estimate_message_tokens,
    estimate_tokens,
)


class Meter:
    """Per-message token counts for one call, with the counter's total as the judge."""

    def __init__(self, counter: TokenCounter) -> None:
        """Measure with ``counter``."""
        self.counter = counter
        self._default = counter is estimate_tokens
        self._cache: dict[int, tuple[BaseMessage, int]] = {}
        self._seeded: tuple[Sequence[BaseMessage], list[int]] | None = None

    def one(self, message: BaseMessage) -> int:
        """Return the tokens of one message (cached for this call)."""
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = estimate_message_tokens(message) if self._default else int(self.counter([message]))
        self._cache[id(message)] = (message, tokens)
        return tokens

    def total(self, messages: Sequence[BaseMessage]) -> int:
        """Return the counter's own total for ``messages``.

        The default estimate is a plain sum, so it reuses the per-message counts;
        any other counter is asked for the whole list (it may add framing).
        """
        if self._default:
            return sum(self.one(m) for m in messages)
        return int(self.counter(messages))

    def seed(self, messages: Sequence[BaseMessage], counts: Sequence[int]) -> None:
        """Remember per-message counts already computed for ``messages``."""
        for message, tokens in zip(messages, counts, strict=True):
            self._cache[id(message)] = (message, tokens)
        self._seeded = (messages, list(counts))

    def counts(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Return the per-message counts of ``messages`` (those seeded, for the seeded list)."""
        if self._seeded is not None and self._seeded[0] is messages:
            return self._seeded[1]
        return list(map(self.one, messages))

    @property
    def additive(self) -> bool:
        """Whether the total is the sum of the per-message counts."""
        return self._default

    def span(self, messages: Sequence[BaseMessage], start: int, end: int) -> int:
        """Return the summed per-message tokens of ``messages[start:end]``."""
        return sum(map(self.one, messages[start:end]))

    def spans(
        self,
        messages: Sequence[BaseMessage],
        ranges: Sequence[tuple[int, int]],
        counts: Sequence[int] | None = None,
    ) -> list[int]:
        """Return :meth:`span` of each ``(start, end)`` range, each message read once.

        ``counts``: the per-message counts of ``messages``, when at hand.
        """
        sums = [0, *accumulate(self.counts(messages) if counts is None else counts)]
        return [sums[end] - sums[start] for start, end in ranges]
