"""How the package reads any Python value: as JSON text, as a snapshot, as a JSON-safe copy.

Tool-call arguments, content blocks and metadata may hold any Python value
(``AIMessage`` accepts them): sets, bytes, datetimes, ``Decimal``, NaN, dict keys
that are tuples or ints mixed with strings, dataclasses, pydantic models, cycles,
nesting thousands of levels deep. Every reader of such values (the estimate, the
references, the Pruner's sizes and briefs, the trimmer, recall, the archive and the
Pruner's memo) reads them as this module does, so that what one counts, another
writes and a third remembers are the same thing:

- ``str``, ``int``, ``float``, ``bool`` and ``None`` are JSON's own (NaN and the
  infinities as Python's ``json`` writes them);
- a ``dict`` (or any ``Mapping``), a dataclass instance (its fields) and a pydantic
  model (its fields and extras) are objects; a key that is not a string is written
  as JSON writes an int, float, bool or None key, any other key (a tuple) as its
  ``str()``;
- a ``list`` or ``tuple`` is an array; a ``set`` or ``frozenset`` is an array in a
  canonical order (by each item's JSON text), so the same set is written alike in
  every process;
- anything else (bytes, datetimes, Decimals, other objects) is the string of its
  ``str()``.

Nothing here recurses over the depth of a value: any depth is read, and a container
met again inside itself is written as ``"[cycle]"``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["STORE_DEPTH", "dumps", "entries", "jsonable", "key_text", "snapshot"]

STORE_DEPTH = 200
"""Containers nested deeper than this in a value written to a store become their JSON text.

JSON stores parse what they read back recursively (Postgres through ``orjson``, which
stops at 1,024 levels; Python's ``json`` at the interpreter's recursion limit)."""

_NESTED = 100
"""Depth up to which a snapshot is built as nested tuples (faster); deeper, it is flat."""

_CYCLE = '"[cycle]"'

# One encoder per option: json.dumps with options builds a new one per call.
_STRING = json.JSONEncoder(ensure_ascii=False).encode


def _text(value: Any) -> str:
    """Return ``str(value)``, or the type's name when ``str()`` itself fails."""
    try:
        return str(value)
    except Exception:  # a broken __str__ must not break the reading
        return f"<{type(value).__name__}>"


def _order(item: Any) -> str:
    return dumps(item, sort_keys=True)


def entries(value: Any) -> tuple[bool, Iterable[Any]] | None:
    """Return ``(is_mapping, items)`` for a value read as a container, else None.

    A mapping's items are ``(key, value)`` pairs (a dataclass's fields, a pydantic
    model's fields and extras); a set's items come in their canonical order.
    """
    if isinstance(value, dict):
        return True, value.items()
    if isinstance(value, list | tuple):
        return False, value
    if isinstance(value, set | frozenset):
        return False, sorted(value, key=_order)
    if isinstance(value, Mapping):
        return True, value.items()
    if isinstance(value, BaseModel):
        return True, list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True, [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    return None


def _default(value: Any) -> Any:
    """The encoders' ``default``: a container as a dict or list, anything else as text."""
    found = entries(value)
    if found is None:
        return _text(value)
    is_mapping, items = found
    return dict(items) if is_mapping else list(items)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_default).encode
_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=_default).encode


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Write any value as JSON text (non-ASCII kept); never raises.

    Values Python's ``json`` writes (with ``default=str``) are written exactly as it
    writes them; see the module docstring for the others. Integers too long for
    ``str()`` are written as that many nines (their size, for the estimate).
    """
    try:
        return _SORTED(value) if sort_keys else _ENCODER(value)
    except (TypeError, ValueError, RecursionError):  # keys, cycles, huge ints, depth
        return "".join(_write(value, sort_keys))


def _int_text(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:  # over the interpreter's limit of digits
        return "9" * (int(value.bit_length() * 0.30103) + 1)


def _scalar(value: Any) -> str | None:
    """Return the JSON text of a scalar, or None for a container or other object."""
    if isinstance(value, str):
        return _STRING(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _int_text(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return None


def key_text(key: Any) -> str:
    """Return a mapping key as JSON writes it (a string), whatever its type."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool | int | float) or key is None:
        return str(_scalar(key))
    return _text(key)


def _pairs(items: Iterable[Any], sort_keys: bool) -> list[tuple[Any, Any]]:
    pairs = list(items)
    if sort_keys:
        try:
            pairs.sort(key=lambda pair: pair[0])
        except TypeError:  # keys of several types: by their text
            pairs.sort(key=lambda pair: key_text(pair[0]))
    return pairs


class _Piece(str):
    """Literal JSON punctuation on the work stack of :func:`_write`."""


class _Leave:
    """The end of a container on the work stack: it leaves the path of open containers."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key


def _write(value: Any, sort_keys: bool) -> Iterator[str]:
    """Yield the JSON text of ``value`` piece by piece, without recursion."""
    stack: list[Any] = [value]
    path: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Piece):
            yield item
            continue
        if isinstance(item, _Leave):
            path.discard(item.key)
            continue
        text = _scalar(item)
        if text is not None:
            yield text
            continue
        found = entries(item)
        if found is None:
            yield _STRING(_text(item))
            continue
        if id(item) in path:
            yield _CYCLE
            continue
        path.add(id(item))
        is_mapping, items = found
        todo: list[Any] = [_Piece("{" if is_mapping else "[")]
        for n, sub in enumerate(_pairs(items, sort_keys) if is_mapping else items):
            if n:
                todo.append(_Piece(", "))
            if is_mapping:
                todo.append(_Piece(_STRING(key_text(sub[0])) + ": "))
                sub = sub[1]
            todo.append(sub)
        todo += [_Piece("}" if is_mapping else "]"), _Leave(id(item))]
        stack.extend(reversed(todo))


def _safe_scalar(value: Any) -> Any:
    """Return a scalar as every JSON store keeps it (see :func:`jsonable`)."""
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return int(value)
        return int.__repr__(value) if value.bit_length() < 13_000 else hex(value)
    return float(value) if math.isfinite(value) else _scalar(value)


def jsonable(value: Any, depth: int = STORE_DEPTH) -> Any:
    """Return a copy of ``value`` that every JSON store keeps and gives back.

    Objects with string keys (two keys written alike stay two: ``"1"`` and
    ``"1#1"``), lists, strings, finite floats, 64-bit ints, bools and None: sets
    become lists (canonical order), tuples lists, other objects their text; NaN,
    the infinities and longer ints their JSON text as a string; a cycle
    ``"[cycle]"``; a container nested deeper than ``depth`` its JSON text.
    """
    root: list[Any] = [None]
    # Work items: (value, container to put it in, key or index there, depth).
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    path: set[int] = set()
    while stack:
        item, into, at, level = stack.pop()
        if isinstance(item, _Leave):
            path.discard(item.key)
            continue
        if _scalar(item) is not None:
            into[at] = _safe_scalar(item)
            continue
        found = entries(item)
        if found is None:
            into[at] = _text(item)
            continue
        if id(item) in path:
            into[at] = "[cycle]"
            continue
        if level >= depth:
            into[at] = dumps(item)
            continue
        is_mapping, items = found
        stack.append((_Leave(id(item)), None, None, level))
        path.add(id(item))
        todo: list[tuple[Any, Any, Any, int]] = []
        if is_mapping:
            obj: dict[str, Any] = {}
            for key, sub in items:
                name = key_text(key)
                while name in obj:
                    name = f"{name}#{len(obj)}"
                obj[name] = None
                todo.append((sub, obj, name, level + 1))
            into[at] = obj
        else:
            seq = list(items)
            arr: list[Any] = [None] * len(seq)
            todo = [(sub, arr, n, level + 1) for n, sub in enumerate(seq)]
            into[at] = arr
        stack.extend(reversed(todo))
    return root[0]


# -- snapshots -------------------------------------------------------------------------

_LEAVES = frozenset({str, bytes, int, type(None)})
"""Leaves kept as they are: equal values of these types are the same value.

Not ``bool`` and ``float``: ``1 == True == 1.0`` and ``0.0 == -0.0``, but each is
written differently, so those leaves are kept with their type and ``repr``."""


class _Token:
    """A marker in a snapshot: equal only to itself, never to a value."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


_TEXT = _Token("text")
_MAP = _Token("mapping")
_SEQ = _Token("sequence")
_CLOSE = _Token("close")
_FLAT = _Token("flat")
_CYCLED = _Token("cycle")


class _TooDeep(Exception):
    """Raised by :func:`_nested` past :data:`_NESTED` levels (or in a cycle)."""


def snapshot(value: Any) -> Any:
    """Return an exact, comparable picture of ``value`` as this module reads it.

    Two snapshots are equal exactly when the values hold the same leaves in the same
    containers (a bool or float by its type and ``repr``; any other object by its
    type and text), so an edit in place anywhere inside a value (an item added to a
    set, a dataclass field changed) changes its snapshot. Leaves are the value's own
    strings, so comparing two snapshots of unchanged text compares identities. Any
    depth and cycles are read (deep values as one flat tuple of tokens).
    """
    try:
        return _nested(value, 0)
    except (_TooDeep, RecursionError):
        return (_FLAT, *_flat(value))


def _nested(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is bool or kind is float:
        return (kind, repr(value))
    if depth > _NESTED:
        raise _TooDeep
    leaves = _LEAVES
    deeper = depth + 1
    if isinstance(value, dict):  # a TypedDict instance is a dict too
        # Keys and values alternate after the kind, ``(dict, k1, v1, k2, v2, ...)``:
        # as exact as a pair per item, at about half the cost. Leaves are inlined:
        # most values are, and a call per value doubles the cost.
        flat: list[Any] = [kind]
        for key, item in value.items():
            flat.append(key if type(key) in leaves else _nested(key, deeper))
            flat.append(item if type(item) in leaves else _nested(item, deeper))
        return tuple(flat)
    if kind is list or kind is tuple:
        return (kind, *[v if type(v) in leaves else _nested(v, deeper) for v in value])
    found = entries(value)
    if found is None:
        return (_TEXT, kind, _text(value))
    is_mapping, items = found
    if is_mapping:
        return (kind, _MAP, *[_nested(part, deeper) for pair in items for part in pair])
    return (kind, _SEQ, *[_nested(v, deeper) for v in items])


def _flat(value: Any) -> Iterator[Any]:
    """Yield the tokens of a snapshot of ``value`` without recursion."""
    stack: list[Any] = [value]
    path: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Leave):
            path.discard(item.key)
            yield _CLOSE
            continue
        kind = type(item)
        if kind in _LEAVES:
            yield item
            continue
        if kind is bool or kind is float:
            yield (kind, repr(item))
            continue
        found = entries(item)
        if found is None:
            yield (_TEXT, kind, _text(item))
            continue
        if id(item) in path:
            yield _CYCLED
            continue
        path.add(id(item))
        is_mapping, items = found
        yield (kind, _MAP if is_mapping else _SEQ)
        todo = [part for pair in items for part in pair] if is_mapping else list(items)
        stack.append(_Leave(id(item)))
        stack.extend(reversed(todo))
