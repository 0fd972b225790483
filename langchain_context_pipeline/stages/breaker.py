"""Circuit breakers for the summarizer: stop calling a model that keeps failing.

There is one breaker per conversation, so that failures in one user's thread
never change what another thread gets: a conversation is known by the LangGraph
``thread_id`` of the run when there is one, else by its first messages (the
system prompt and the task). The bank of breakers is bounded.

Why this squares with determinism (DESIGN invariant 4): an open breaker makes the
digest stand in without calling the model, in that conversation only and only
after that conversation's own failures in a row. A fresh pipeline would call the
model, and get the digest too while the model still fails; the outputs differ
only when the model recovers during the cooldown, which is the breaker's purpose.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

from langchain_core.messages import BaseMessage
from langchain_core.runnables import ensure_config

from langchain_context_pipeline.messages.snapshot import Transient
from langchain_context_pipeline.tokens.counters import message_text

__all__ = ["BreakerBank", "CircuitBreaker", "conversation_key"]

_HEAD_MESSAGES = 2
"""Messages that name a conversation when the run has no ``thread_id``."""


class CircuitBreaker(Transient):
    """Opens after ``failure_limit`` failures in a row, for ``cooldown_calls`` calls.

    While open, :meth:`allow` says no and the digest stands in without a call; when
    the cooldown is spent, the next call is tried again. Thread-safe: one pipeline
    object may serve many threads or tasks at once.
    """

    def __init__(self, failure_limit: int, cooldown_calls: int) -> None:
        """Configure the breaker (``failure_limit=0`` never opens it)."""
        self.failure_limit = failure_limit
        self.cooldown_calls = cooldown_calls
        self._failures = 0
        self._skips_left = 0
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """Return whether the summarizer may be called now (spends one skip if not)."""
        with self._lock:
            if self._skips_left > 0:
                self._skips_left -= 1
                return False
            return True

    def record(self, ok: bool) -> bool:
        """Record a call's outcome; return whether this failure opened the breaker."""
        with self._lock:
            if ok:
                self._failures = 0
                return False
            self._failures += 1
            if self.failure_limit and self._failures >= self.failure_limit:
                self._failures = 0
                self._skips_left = self.cooldown_calls
                return True
            return False

    @property
    def is_open(self) -> bool:
        """Whether calls are being skipped now."""
        with self._lock:
            return self._skips_left > 0


def conversation_key(messages: Sequence[BaseMessage]) -> str:
    """Return a key naming the conversation ``messages`` belong to.

    The ``thread_id`` of the LangGraph run in progress, when there is one; else a
    hash of the first messages' ids (their text when they have none).
    """
    configurable = ensure_config().get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is not None:
        return f"thread:{thread}"
    key = hashlib.sha256()
    for message in messages[:_HEAD_MESSAGES]:
        part = message.id or message_text(message)
        key.update(f"{message.type}:{part}\x00".encode("utf-8", "surrogatepass"))
    return "head:" + key.hexdigest()


class BreakerBank(Transient):
    """One :class:`CircuitBreaker` per conversation, the least recently used forgotten."""

    def __init__(self, failure_limit: int, cooldown_calls: int, size: int = 4096) -> None:
        """Configure every breaker alike; keep at most ``size`` of them."""
        self.failure_limit = failure_limit
        self.cooldown_calls = cooldown_calls
        self.size = size
        self._breakers: OrderedDict[str, CircuitBreaker] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> CircuitBreaker:
        """Return the breaker of conversation ``key`` (a closed one for a new key)."""
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is None:
                breaker = CircuitBreaker(self.failure_limit, self.cooldown_calls)
                self._breakers[key] = breaker
                if len(self._breakers) > self.size:
                    self._breakers.popitem(last=False)
            else:
                self._breakers.move_to_end(key)
            return breaker

    def __len__(self) -> int:
        """The number of conversations with a breaker."""
        with self._lock:
            return len(self._breakers)
