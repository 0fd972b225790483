"""A circuit breaker for the summarizer: stop calling a model that keeps failing."""

from __future__ import annotations

import threading


class CircuitBreaker:
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
