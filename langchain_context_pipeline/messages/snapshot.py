"""Snapshots of a message's state, so a memo can tell an edited message from the same one.

A memo keyed by a message's identity goes stale when the message is edited in place
(``message.content = ...``, ``message.content[0]["text"] = ...``,
``call["args"]["path"] = ...``, ``call["args"]["tags"].add(...)``, a dataclass's
field set anew). A snapshot is the message's fields read as
:mod:`langchain_context_pipeline.messages.values` reads every value (sets, dataclasses,
pydantic models and other objects included, at any depth), rebuilt as tuples whose
leaves are the very strings and ints the message holds. Comparing two snapshots
compares leaves by identity first (free for the strings that did not change) and by
value otherwise, so it costs one walk over the message's structure, never a pass
over its text, and is exact: no hash that could collide.

A memo stores a :func:`state` and checks it with :func:`unchanged`. For a *plain*
value (nothing but ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``,
``bool`` and ``None``, exact types, keys leaves, at most :data:`_DEPTH` levels: a
message as models and agents build it) the state is the value's ``marshal`` bytes
(format 2: no back-references, so the bytes depend on the value alone), and the
check marshals the value again, in C, and compares bytes. It is as exact as a
snapshot: ``marshal`` writes each of these types under a type code of its own (it
refuses subclasses), a float by its 8 bytes (``-0.0`` is not ``0.0``), an int by its
digits, a dict in its order; the byte string parses one way only, so a value whose
bytes equal a plain value's holds the same types, in the same containers, with equal
leaves. (Only ``bytes`` and other buffers, and code objects, share a type code with
values written differently; a plain value has none, so they never match it.) Any
other value is snapshotted.
"""

from __future__ import annotations

import itertools
import marshal
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.messages.values import snapshot

__all__ = [
    "Transient",
    "forgetter",
    "message_snapshot",
    "message_state",
    "message_unchanged",
    "snapshot",
    "state",
    "unchanged",
]

_DEPTH = 100
"""Depth up to which a value can be plain (a cycle never is)."""

_LEAVES = frozenset({str, int, float, bool, type(None)})

_MARSHAL = 2
"""The ``marshal`` format: the last one without back-references (which depend on
reference counts, not on the value)."""


class _Packed:
    """A plain value's state: its ``marshal`` bytes (see the module docstring)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Packed) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is plain (see the module docstring)."""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if depth > _DEPTH:
        return False
    leaves = _LEAVES
    deeper = depth + 1
    if kind is dict:
        for key, item in value.items():
            if type(key) not in leaves:
                return False
            if type(item) not in leaves and not _plain(item, deeper):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 - all() over a generator costs more
            if type(item) not in leaves and not _plain(item, deeper):
                return False
        return True
    return False


def state(value: Any) -> Any:
    """Return what :func:`unchanged` checks ``value`` against later.

    The ``marshal`` bytes of a plain value, else its :func:`snapshot`.
    """
    if _plain(value, 0):
        try:
            return _Packed(marshal.dumps(value, _MARSHAL))
        except ValueError:  # pragma: no cover - a plain value always marshals
            pass
    return snapshot(value)


def unchanged(value: Any, old: Any) -> bool:
    """Whether ``value`` is as it was when ``old = state(value)`` was taken, exactly."""
    if isinstance(old, _Packed):
        try:
            return bool(marshal.dumps(value, _MARSHAL) == old.data)
        except ValueError:  # not marshallable (or too deep): not the plain value it was
            return False
    return bool(snapshot(value) == old)


_CLASS_NUMBERS: dict[type, int] = {}
"""A number for each message class seen, never reused: a plain state names its class
by it (bare bytes, no tuple holding the class: nothing the garbage collector tracks)."""

_NUMBERS = itertools.count()


def _class_number(kind: type) -> int:
    number = _CLASS_NUMBERS.get(kind)
    if number is None:
        number = _CLASS_NUMBERS.setdefault(kind, next(_NUMBERS))  # atomic: unique numbers
    return number


def _fields(message: BaseMessage, more: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(class number, fields, extra fields, more)``: what a message's state is taken of."""
    return (
        _class_number(type(message)),
        message.__dict__,
        message.__pydantic_extra__ or None,
        more,
    )


def message_state(message: BaseMessage, *more: Any) -> Any:
    """Return the :func:`state` of every field of ``message`` (extras too), and of ``more``.

    With its class: for plain fields, the ``marshal`` bytes of the class's number and
    the fields, one untracked object per remembered message; else ``(class, snapshot)``
    (a tuple, never bytes).
    """
    fields = _fields(message, more)
    if _plain(fields, 0):
        try:
            return marshal.dumps(fields, _MARSHAL)
        except ValueError:  # pragma: no cover - a plain value always marshals
            pass
    return type(message), snapshot(fields[1:])


def message_unchanged(message: BaseMessage, old: Any, *more: Any) -> bool:
    """Whether ``message`` and ``more`` are as when ``old = message_state(message, *more)``."""
    fields = _fields(message, more)
    if type(old) is bytes:
        try:
            return marshal.dumps(fields, _MARSHAL) == old
        except ValueError:  # not marshallable (or too deep): not the plain value it was
            return False
    return type(message) is old[0] and bool(snapshot(fields[1:]) == old[1])


def forgetter(memo: dict[int, Any]) -> Callable[[weakref.KeyedRef[int, Any]], None]:
    """Return the callback that drops a gone message's entry from ``memo``.

    A memo keyed by ``id(message)`` holds each message by ``weakref.KeyedRef(message,
    callback, id(message))``: one callback per memo, the key on each reference, no
    closure per entry, and no message kept alive.
    """

    def forget(ref: weakref.KeyedRef[int, Any]) -> None:
        memo.pop(ref.key, None)

    return forget


def message_snapshot(message: BaseMessage, *more: Any) -> Any:
    """Return a snapshot of every field of ``message`` (extra fields too), and of ``more``."""
    extra = message.__pydantic_extra__
    return (
        type(message),
        snapshot(message.__dict__),
        snapshot(extra) if extra else None,
        snapshot(more),
    )


class Transient:
    """Mixin: the attributes named in ``transient`` are left out of copies and pickles.

    A ``threading.Lock`` cannot be copied or pickled, and a memo keyed by object
    identity means nothing in a copy: ``copy.copy``, ``copy.deepcopy`` and ``pickle``
    leave them out of the object's state, and the copy gets a new ``_lock`` (when
    ``_lock`` is transient) and whatever :meth:`_fresh` sets; every other attribute
    is copied as usual.
    """

    transient: ClassVar[tuple[str, ...]] = ("_lock",)

    def __getstate__(self) -> dict[str, Any]:
        """Return the attributes to copy: all but the transient ones."""
        return {k: v for k, v in self.__dict__.items() if k not in self.transient}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the copied attributes and build the transient ones anew."""
        self.__dict__.update(state)
        self._fresh()

    def _fresh(self) -> None:
        """Set the transient attributes of a new copy (a new lock by default)."""
        if "_lock" in self.transient:
            self._lock = threading.Lock()
