"""A message's anatomy: its texts, tool calls, tool results and costs, read once.

:func:`read` parses one message, in every format the input coercion accepts (see
:mod:`~langchain_context_pipeline.messages.blocks` for the formats and
:mod:`~langchain_context_pipeline.messages.kinds` for the block kinds), into a frozen
:class:`Anatomy`. Every reader of the package (the counters, ``message_text``,
the call and result ids, the pairing, references, the digest, the cuts) asks
it, so they all see the same message.

The anatomy is remembered per message object: a pass that reads a message many
times (count it, pair it, brief it, cut it) parses it once, and the next pass
over the same unchanged message not at all. The memo compares the state of every
field of the message (see :mod:`~langchain_context_pipeline.messages.snapshot`),
so an edit in place (``message.content[0]["text"] = ...``,
``message.tool_calls[0]["args"]["path"] = ...``) is seen and read anew; while
:func:`read` gives the same anatomy object back, the whole message is as it was when
that anatomy was built (the Pruner's memo relies on it, see :func:`peek`).
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_pipeline.messages.kinds import (
    CALL_BLOCKS,
    FILE_TOKENS,
    RESULT_BLOCKS,
    RESULT_CONTENT,
    block_kind,
    block_type,
)
from langchain_context_pipeline.messages.parts import (
    block_call_id,
    block_parts,
    call_text,
    invalid_call_text,
    parsed_arguments,
    result_text,
)
from langchain_context_pipeline.messages.snapshot import message_state, message_unchanged

__all__ = [
    "Anatomy",
    "Call",
    "Result",
    "build_count",
    "call_ids",
    "call_index",
    "call_text",
    "count_images",
    "current_pass",
    "invalid_call_text",
    "message_text",
    "one_pass",
    "peek",
    "read",
    "result_text",
]

_MEMO_SIZE = 50_000
"""Anatomies remembered (the memo is emptied when full, as the Pruner's is)."""

BUILDS = 0
"""How many anatomies :func:`read` has built (memo misses), for benchmarks."""


def build_count() -> int:
    """Return how many anatomies have been built since the process started."""
    return BUILDS


@dataclass(frozen=True, slots=True)
class Call:
    """One copy of a tool call, as one place of the message carries it."""

    id: str
    """The call id ("" when the copy has none)."""
    name: str
    args: Any
    """The arguments (a JSON string of them is read; unreadable: ``{"arguments": s}``)."""
    source: str
    """Where the copy is: ``tool_calls``, ``invalid_tool_calls``, ``block`` or
    ``additional_kwargs`` (OpenAI-style ``additional_kwargs["tool_calls"]``)."""
    position: int | None = None
    """The content block's position, for a ``block`` copy."""


@dataclass(frozen=True, slots=True)
class Result:
    """One tool result a message carries."""

    call_id: str
    text: str
    """The result's text (its text parts joined by newlines)."""
    is_error: bool
    position: int | None
    """The result block's position; None for a ToolMessage (its whole content)."""
    others: tuple[Any, ...] = ()
    """The result's non-text parts (images, documents...)."""


@dataclass(frozen=True, slots=True)
class Anatomy:
    """What one message holds, read once (see :func:`read`)."""

    texts: tuple[tuple[int | None, str], ...]
    """The message's text: ``(block position, text)``; string content is position None."""
    calls: tuple[Call, ...]
    """Every copy of every tool call (an AIMessage's), in the order ``tool_calls``,
    ``invalid_tool_calls``, blocks, ``additional_kwargs``."""
    results: tuple[Result, ...]
    """The tool results the message carries (a ToolMessage, or result blocks)."""
    reasoning: tuple[int, ...]
    """Positions of the reasoning blocks."""
    images: int
    """Image blocks (of the content itself, not inside a tool result)."""
    media: int
    """Other media blocks of the content counted at their fixed cost (no inline text)."""
    fixed: int
    """The fixed cost of the media blocks."""
    content_texts: tuple[str, ...]
    """The texts a provider tokenizes in the content (no listed tool calls)."""
    call_texts: tuple[str, ...]
    """The texts of ``tool_calls`` and ``invalid_tool_calls``."""
    _index: dict[str, tuple[str, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """:meth:`call_index`, once built."""

    @property
    def text(self) -> str:
        """The message's plain text: its texts joined by newlines."""
        return "\n".join(text for _, text in self.texts)

    @property
    def text_positions(self) -> frozenset[int | None]:
        """The positions that hold text (None for string content)."""
        return frozenset(position for position, _ in self.texts)

    def call_ids(self) -> list[str]:
        """Return the ids of the calls, in every format, once each."""
        return list(dict.fromkeys(c.id for c in self.calls if c.id))

    def result_ids(self) -> list[str]:
        """Return the ids of the calls the message answers, once each."""
        return list(dict.fromkeys(r.call_id for r in self.results if r.call_id))

    def call_index(self) -> dict[str, tuple[str, Any]]:
        """Return ``{call id: (name, args)}``: the first copy of each id names it.

        ``tool_calls`` first, then the calls only a block or
        ``additional_kwargs`` carries; invalid tool calls name none. Built once: one
        anatomy gives the very same dict and ``(name, args)`` tuples every time (do
        not change them), so an entry identical to one taken earlier is the same
        call, unchanged while :func:`read` gives this anatomy back.
        """
        found = self._index
        if found is None:
            found = {}
            for call in self.calls:
                if call.id and call.source != "invalid_tool_calls" and call.id not in found:
                    found[call.id] = (call.name, call.args)
            object.__setattr__(self, "_index", found)
        return found

    def countable(self) -> tuple[list[str], int]:
        """Return the texts a provider tokenizes and the fixed cost of the media."""
        return [*self.content_texts, *self.call_texts], self.fixed


class _Entry:
    """One remembered anatomy: the message (weakly), the state it was read in."""

    __slots__ = ("anatomy", "source", "state")

    def __init__(self, source: weakref.ref[BaseMessage], state: Any, anatomy: Anatomy) -> None:
        self.source = source
        self.state = state
        self.anatomy = anatomy


_memo: dict[int, _Entry] = {}


_pass: contextvars.ContextVar[dict[int, tuple[BaseMessage, Anatomy]] | None] = (
    contextvars.ContextVar("anatomy_pass", default=None)
)


@contextlib.contextmanager
def one_pass() -> Iterator[None]:
    """Within this block, a message read once is not snapshotted again.

    For a pass of the pipeline over messages it never edits (it edits copies):
    each message's state is compared with the memo's once, at its first read in
    the pass, instead of at every read. Nested passes share the outer one.
    """
    if _pass.get() is not None:
        yield
        return
    token = _pass.set({})
    try:
        yield
    finally:
        _pass.reset(token)


def current_pass() -> object | None:
    """Return a token of the :func:`one_pass` block running (None outside of one)."""
    return _pass.get()


def peek(message: BaseMessage) -> Anatomy | None:
    """Return the anatomy :func:`read` gave for ``message`` in this pass, or None.

    None outside a :func:`one_pass` block or before the message's first read in it.
    Costs no check: the pass checked the message at that first read.
    """
    seen = _pass.get()
    found = None if seen is None else seen.get(id(message))
    return found[1] if found is not None and found[0] is message else None


def read(message: BaseMessage) -> Anatomy:
    """Return the anatomy of ``message``, from the memo when it is unchanged."""
    global BUILDS
    key = id(message)
    seen = _pass.get()
    if seen is not None:
        found = seen.get(key)
        if found is not None and found[0] is message:
            return found[1]
    hit = _memo.get(key)
    if hit is not None and hit.source() is message and message_unchanged(message, hit.state):
        if seen is not None:
            seen[key] = (message, hit.anatomy)
        return hit.anatomy
    anatomy = _build(message)
    BUILDS += 1
    if len(_memo) >= _MEMO_SIZE:
        _memo.clear()

    def forget(_: object, key: int = key) -> None:
        entry = _memo.get(key)
        if entry is not None and entry.source() is None:
            _memo.pop(key, None)

    _memo[key] = _Entry(weakref.ref(message, forget), message_state(message), anatomy)
    if seen is not None:
        seen[key] = (message, anatomy)
    return anatomy


def _listed_only(message: AIMessage) -> bool:
    """Whether ``tool_calls`` is the only copy of the calls (string content, the common case)."""
    return (
        isinstance(message.content, str)
        and not message.invalid_tool_calls
        and not isinstance(message.additional_kwargs.get("tool_calls"), list)
    )


def call_ids(message: AIMessage) -> list[str]:
    """Return ``read(message).call_ids()``, read directly from the places calls are.

    Outside a :func:`one_pass` block, the ids alone cost less to read than the
    memo's check: ``tool_calls``, ``invalid_tool_calls``, call blocks and
    OpenAI-style raw calls, in the anatomy's order, once each. In one, a message
    that is more than ``tool_calls`` is read once for the whole pass.
    """
    if _listed_only(message):
        ids: list[Any] = [c.get("id") for c in message.tool_calls]
    elif _pass.get() is not None:  # in a pass, the anatomy is read (and checked) once
        return read(message).call_ids()
    else:
        ids = [c.get("id") for c in message.tool_calls]
        ids += [c.get("id") for c in message.invalid_tool_calls]
        if not isinstance(message.content, str):
            ids += [
                block_call_id(b)
                for b in message.content
                if isinstance(b, dict) and block_type(b) in CALL_BLOCKS
            ]
        raw = message.additional_kwargs.get("tool_calls")
        if isinstance(raw, list):
            ids += [r.get("id") for r in raw if isinstance(r, dict)]
    return list(dict.fromkeys(i for i in ids if isinstance(i, str) and i))


def call_index(message: AIMessage) -> dict[str, tuple[str, Any]]:
    """Return ``read(message).call_index()``.

    In a :func:`one_pass` block, always the anatomy's own index (read and checked
    once a pass), whose entries keep their identity while the message is unchanged;
    outside of one, from ``tool_calls`` alone when they are all the calls.
    """
    if _pass.get() is None and _listed_only(message):
        found: dict[str, tuple[str, Any]] = {}
        for call in message.tool_calls:
            cid = call.get("id")
            if isinstance(cid, str) and cid and cid not in found:
                found[cid] = (call["name"], call["args"])
        return found
    return read(message).call_index()


def _block_call(block: dict[str, Any], position: int) -> Call:
    args_key = CALL_BLOCKS[block["type"]][1]
    name = block.get("name")
    return Call(
        block_call_id(block),
        name if isinstance(name, str) and name else "tool",
        parsed_arguments(block.get(args_key, {})),
        "block",
        position,
    )


def _id(value: Any) -> str:
    """Return a call id as the anatomy holds it: a string, "" for none."""
    return value if isinstance(value, str) else ""


def _calls(message: AIMessage) -> list[Call]:
    calls = [Call(_id(c.get("id")), c["name"], c["args"], "tool_calls") for c in message.tool_calls]
    for bad in message.invalid_tool_calls:
        calls.append(
            Call(_id(bad.get("id")), bad.get("name") or "", bad.get("args"), "invalid_tool_calls")
        )
    if not isinstance(message.content, str):
        for position, block in enumerate(message.content):
            if isinstance(block, dict) and block_type(block) in CALL_BLOCKS:
                calls.append(_block_call(block, position))
    raw = message.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict):
                continue
            fn = item.get("function")
            fn = fn if isinstance(fn, dict) else {}
            cid, name = item.get("id"), fn.get("name")
            calls.append(
                Call(
                    cid if isinstance(cid, str) else "",
                    name if isinstance(name, str) and name else "tool",
                    parsed_arguments(fn.get("arguments", {})),
                    "additional_kwargs",
                )
            )
    return calls


def _build(message: BaseMessage) -> Anatomy:
    """Parse ``message`` (see :class:`Anatomy`)."""
    content = message.content
    texts: list[tuple[int | None, str]] = []
    results: list[Result] = []
    reasoning: list[int] = []
    counted: list[str] = []
    costs = [0, 0, 0]  # images, media at a fixed cost, fixed tokens
    # A ToolMessage is one result (its whole content); an AIMessage answers none.
    answers = not isinstance(message, (AIMessage, ToolMessage))
    calls = _calls(message) if isinstance(message, AIMessage) else []
    listed = frozenset(
        c.id for c in calls if c.id and c.source in ("tool_calls", "invalid_tool_calls")
    )
    if isinstance(content, str):
        texts.append((None, content))
        if content:
            counted.append(content)
    else:
        for position, block in enumerate(content):
            kind = block_kind(block)
            if kind == "text":
                text = block if isinstance(block, str) else block.get("text")
                if isinstance(text, str):
                    texts.append((position, text))
            elif kind == "reasoning":
                reasoning.append(position)
            elif kind == "result" and answers and isinstance(block, dict):
                key = RESULT_BLOCKS[block["type"]]
                cid = block.get(key)
                if cid:
                    text, others = result_text(block.get(RESULT_CONTENT[block["type"]]))
                    error = block.get("is_error") is True
                    results.append(Result(str(cid), text, error, position, tuple(others)))
            cost = block_parts(block, counted, listed)
            costs[0] += kind == "image"
            costs[1] += kind == "media" and cost == FILE_TOKENS
            costs[2] += cost
    if isinstance(message, ToolMessage):
        text = "\n".join(t for _, t in texts)
        results.append(Result(message.tool_call_id, text, message.status == "error", None))
    call_texts: list[str] = []
    if isinstance(message, AIMessage):
        call_texts = [call_text(call) for call in message.tool_calls]
        call_texts += [invalid_call_text(bad) for bad in message.invalid_tool_calls]
    return Anatomy(
        texts=tuple(texts),
        calls=tuple(calls),
        results=tuple(results),
        reasoning=tuple(reasoning),
        images=costs[0],
        media=costs[1],
        fixed=costs[2],
        content_texts=tuple(counted),
        call_texts=tuple(call_texts),
    )


def message_text(message: BaseMessage) -> str:
    """Return the plain text of a message: its string content or its text blocks joined.

    Text blocks are every prose kind (``text``, Responses ``input_text`` and
    ``output_text``, bare strings), as the message's anatomy reads them.
    """
    # Not ``BaseMessage.text``: it joins text blocks with no separator, so two blocks
    # ("ok", "done") would read as "okdone" in briefs, cuts and the summarizer's transcript.
    content = message.content
    if isinstance(content, str):
        return content
    return read(message).text


def count_images(message: BaseMessage) -> int:
    """Return how many image blocks a message's content holds."""
    if isinstance(message.content, str):
        return 0
    return read(message).images
