"""Snapshots of a message's state, so a memo can tell an edited message from the same one.

A memo keyed by a message's identity goes stale when the message is edited in place
(``message.content = ...``, ``message.content[0]["text"] = ...``,
``call["args"]["path"] = ...``). A snapshot is the message's fields rebuilt as
nested tuples whose leaves are the very string, int and other objects the
message holds (a bool or float as its type and ``repr``, since ``1 == True`` and
``0.0 == -0.0``). Comparing two snapshots compares leaves by identity first (free
for the strings that did not change) and by value otherwise, so it costs one walk
over the message's structure, never a pass over its text, and is exact: no hash
that could collide.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

__all__ = ["message_snapshot", "snapshot"]

_LEAVES = frozenset({str, bytes, int, type(None)})
"""Leaves kept as they are: equal values of these types are the same value.

Not ``bool`` and ``float``: ``1 == True == 1.0`` and ``0.0 == -0.0``, but each is
written differently, so those leaves are kept with their type and ``repr``."""


class _Same:
    """A leaf of a type the snapshot does not look into: equal only to itself.

    Such objects (a tool's artifact, a client object in ``additional_kwargs``) are
    shared by reference between a message and its pruned copy, so an edit inside
    them shows in both; only replacing them has to be seen.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def snapshot(value: Any) -> Any:
    """Return ``value`` as nested tuples of its leaves (see the module docstring).

    Raises:
        RecursionError: for a structure nested deeper than the interpreter's limit.
    """
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is bool or kind is float:
        return (kind, repr(value))
    leaves = _LEAVES
    if isinstance(value, dict):  # a TypedDict instance is a dict too
        # Keys and values alternate after the kind, ``(dict, k1, v1, k2, v2, ...)``:
        # as exact as a pair per item, at about half the cost. Leaves are inlined:
        # most values are, and a call per value doubles the cost.
        if not value:
            return (kind,)
        flat: list[Any] = [kind]
        for key, item in value.items():
            flat.append(key)
            flat.append(item if type(item) in leaves else snapshot(item))
        return tuple(flat)
    if kind is list or kind is tuple:
        if not value:
            return (kind,)
        return (kind, *[v if type(v) in leaves else snapshot(v) for v in value])
    return _Same(value)


def message_snapshot(message: BaseMessage, *more: Any) -> Any:
    """Return a snapshot of every field of ``message`` (extra fields too), and of ``more``.

    Returns None when the message is nested too deeply to walk: the caller then
    does not remember anything for it.
    """
    try:
        extra = message.__pydantic_extra__
        return (
            type(message),
            snapshot(message.__dict__),
            snapshot(extra) if extra else None,
            snapshot(more),
        )
    except RecursionError:
        return None
