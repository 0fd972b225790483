"""A message's anatomy: its texts, tool calls, tool results and costs, read once.

:func:`read` parses one message, in every format the input coercion accepts (see
:mod:`~langchain_context_pipeline.messages.blocks` for the formats and
:mod:`~langchain_context_pipeline.messages.parse` for the parsing), into a frozen
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
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.messages.kinds import CALL_BLOCKS, block_type
from langchain_context_pipeline.messages.parse import (
    RESULT_MESSAGES,
    Anatomy,
    Call,
    Result,
    keeps_form,
    legacy_call,
    legacy_call_id,
    result_message_id,
)
from langchain_context_pipeline.messages.parse import build as _build
from langchain_context_pipeline.messages.parts import (
    block_call_id,
    call_text,
    invalid_call_text,
    legacy_call_text,
    result_text,
)
from langchain_context_pipeline.messages.snapshot import (
    forgetter,
    message_state,
    message_unchanged,
)

__all__ = [
    "RESULT_MESSAGES",
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
    "keeps_form",
    "legacy_call",
    "legacy_call_id",
    "legacy_call_text",
    "message_text",
    "one_pass",
    "peek",
    "read",
    "result_message_id",
    "result_text",
]

_MEMO_SIZE = 50_000
"""Anatomies remembered (the memo is emptied when full, as the Pruner's is)."""

BUILDS = 0
"""How many anatomies :func:`read` has built (memo misses), for benchmarks."""


def build_count() -> int:
    """Return how many anatomies have been built since the process started."""
    return BUILDS


class _Entry:
    """One remembered anatomy: the message (weakly), the state it was read in."""

    __slots__ = ("anatomy", "source", "state")

    def __init__(
        self, source: weakref.KeyedRef[int, BaseMessage], state: Any, anatomy: Anatomy
    ) -> None:
        self.source = source
        self.state = state
        self.anatomy = anatomy


_memo: dict[int, _Entry] = {}


_forget = forgetter(_memo)


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
    _memo[key] = _Entry(weakref.KeyedRef(message, _forget, key), message_state(message), anatomy)
    if seen is not None:
        seen[key] = (message, anatomy)
    return anatomy


def _listed_only(message: AIMessage) -> bool:
    """Whether ``tool_calls`` is the only copy of the calls (string content, the common case).

    A ``function_call`` beside listed calls (langchain-google-genai's copy of the last
    one) is no call of its own (see :func:`legacy_call`): such a message is listed only.
    """
    return (
        isinstance(message.content, str)
        and not message.invalid_tool_calls
        and not isinstance(message.additional_kwargs.get("tool_calls"), list)
        and ("function_call" not in message.additional_kwargs or legacy_call(message) is None)
    )


def call_ids(message: AIMessage) -> list[str]:
    """Return ``read(message).call_ids()``, read directly from the places calls are.

    Outside a :func:`one_pass` block, the ids alone cost less to read than the
    memo's check: ``tool_calls``, ``invalid_tool_calls``, call blocks,
    OpenAI-style raw calls and a legacy ``function_call`` (its
    :func:`legacy_call_id`), in the anatomy's order, once each. In one, a message
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
        legacy = legacy_call(message)
        if legacy is not None:
            ids.append(legacy_call_id(legacy.get("name")))
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
