"""A memo of estimates (or any value of a string) bounded by the memory of its keys."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

__all__ = ["Memo"]

_ENTRY_BYTES = 100
"""The memo's own cost per entry (dict slot, int), charged beside the string."""


_Key = TypeVar("_Key", bound=Hashable)
_Value = TypeVar("_Value")


class Memo(dict[_Key, _Value]):
    """Estimates by key (a string), bounded in bytes: two generations of plain dicts.

    The memo itself is the young generation, so a hit is one C-level dict lookup
    (``memo[text]``; :meth:`__missing__` runs only on a miss). New entries go to the
    young generation; when it holds half the budget it becomes the old one (and the
    previous old one is dropped). A miss that finds its string in the old generation
    moves it back to the young one, so every string asked for again within half the
    budget stays, without reordering anything on a hit (unlike an LRU list).
    Thread-safe: hits read a dict; misses update the generations under a lock.
    """

    def __init__(
        self,
        estimate: Callable[[_Key], _Value],
        budget: int,
        sizeof: Callable[[_Key], int] = sys.getsizeof,
    ) -> None:
        """Memoise ``estimate`` in at most ``budget`` bytes (keys as ``sizeof`` sizes them).

        A key must determine the estimate: equal keys, equal estimates.
        """
        super().__init__()
        self._estimate = estimate
        self._sizeof = sizeof
        self._half = budget // 2
        self._old: dict[_Key, _Value] = {}
        self._young_bytes = 0
        self._lock = threading.Lock()

    def __missing__(self, key: _Key) -> _Value:
        """Find ``key`` in the old generation or estimate it; remember it as young."""
        tokens = self._old.get(key)
        if tokens is None:
            tokens = self._estimate(key)
        size = self._sizeof(key) + _ENTRY_BYTES
        if size > self._half:
            return tokens  # larger than a generation: never held
        with self._lock:
            if key not in self:
                self._old.pop(key, None)
                if self._young_bytes + size > self._half:
                    self._old = dict(self)
                    self.clear()
                    self._young_bytes = 0
                self[key] = tokens
                self._young_bytes += size
        return tokens

    def cache_clear(self) -> None:
        """Forget every estimate."""
        with self._lock:
            self.clear()
            self._old = {}
            self._young_bytes = 0

    @property
    def held(self) -> int:
        """Return how many keys are held (both generations)."""
        return len(self) + len(self._old)
