"""A message parsed: its :class:`Anatomy`, and :func:`build`, which reads it.

The only code that reads the provider formats of a message (the block kinds are in
:mod:`~langchain_context_pipeline.messages.kinds`, the parts of a block in
:mod:`~langchain_context_pipeline.messages.parts`). Everything else asks
:func:`langchain_context_pipeline.messages.anatomy.read`, which remembers what
:func:`build` gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, FunctionMessage, ToolMessage

from langchain_context_pipeline.messages.kinds import (
    CALL_BLOCKS,
    FILE_TOKENS,
    RESULT_BLOCKS,
    RESULT_CONTENT,
    TEXT_INPUT_CALLS,
    TEXT_KEYS,
    block_kind,
    block_type,
)
from langchain_context_pipeline.messages.parts import (
    block_call_id,
    block_parts,
    call_text,
    invalid_call_text,
    legacy_call_text,
    parsed_arguments,
    result_text,
)

__all__ = [
    "RESULT_MESSAGES",
    "Anatomy",
    "Call",
    "Result",
    "build",
    "keeps_form",
    "legacy_call",
    "legacy_call_id",
    "result_message_id",
]

RESULT_MESSAGES: tuple[type[BaseMessage], ...] = (ToolMessage, FunctionMessage)
"""Messages that are one tool result each, their whole content: a ``ToolMessage``
answers its ``tool_call_id``; a legacy OpenAI ``FunctionMessage`` (role
``function``) answers the nearest preceding open legacy call of its name."""

_LEGACY_PREFIX = "legacy-function-call:"


def legacy_call_id(name: Any) -> str:
    """Return the id the anatomy gives a legacy function call of ``name`` and its result.

    A legacy OpenAI call (``additional_kwargs["function_call"]``, one per message)
    and its ``FunctionMessage`` carry no id, only the function's name. Both read
    this id, so the one pairing rule (the nearest preceding open call of an id)
    pairs each ``FunctionMessage`` with the nearest open call of its name.
    """
    return _LEGACY_PREFIX + (name if isinstance(name, str) else "")


def legacy_call(message: BaseMessage) -> dict[str, Any] | None:
    """Return an AIMessage's legacy ``additional_kwargs["function_call"]``, or None.

    Only when it is the message's call: when the message lists tool calls
    (``tool_calls``, ``invalid_tool_calls`` or OpenAI-style
    ``additional_kwargs["tool_calls"]``) langchain-openai sends those instead, and
    langchain-google-genai, which sets ``function_call`` beside ``tool_calls`` as a copy
    of the last call, sends ``tool_calls``: the copy is never sent, so it is neither
    counted, nor paired, nor cut.
    """
    if not isinstance(message, AIMessage):
        return None
    call = message.additional_kwargs.get("function_call")
    if not isinstance(call, dict):
        return None
    if message.tool_calls or message.invalid_tool_calls:
        return None
    return None if "tool_calls" in message.additional_kwargs else call


def result_message_id(message: BaseMessage) -> str:
    """Return the call id a :data:`RESULT_MESSAGES` message answers ("" for any other)."""
    if isinstance(message, ToolMessage):
        return message.tool_call_id if isinstance(message.tool_call_id, str) else ""
    if isinstance(message, FunctionMessage):
        return legacy_call_id(message.name)
    return ""


@dataclass(frozen=True, slots=True)
class Call:
    """One copy of a tool call, as one place of the message carries it."""

    id: str
    """The call id ("" when the copy has none)."""
    name: str
    args: Any
    """The arguments (a JSON string of them is read; unreadable: ``{"arguments": s}``)."""
    source: str
    """Where the copy is: ``tool_calls``, ``invalid_tool_calls``, ``block``,
    ``additional_kwargs`` (OpenAI-style ``additional_kwargs["tool_calls"]``) or
    ``function_call`` (a legacy OpenAI ``additional_kwargs["function_call"]``, whose
    id is :func:`legacy_call_id` of its name)."""
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
    """What one message holds, read once.

    Built by :func:`build`; remembered per message by
    :func:`~langchain_context_pipeline.messages.anatomy.read`.
    """

    texts: tuple[tuple[int | None, str], ...]
    """The message's text: ``(block position, text)``; string content is position None."""
    calls: tuple[Call, ...]
    """Every copy of every tool call (an AIMessage's), in the order ``tool_calls``,
    ``invalid_tool_calls``, blocks, ``additional_kwargs``, legacy ``function_call``."""
    results: tuple[Result, ...]
    """The tool results the message carries (a ToolMessage or FunctionMessage, or
    result blocks)."""
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
    """The texts of ``tool_calls``, ``invalid_tool_calls`` and a legacy ``function_call``."""
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
        call, unchanged while :func:`~langchain_context_pipeline.messages.anatomy.read`
        gives this anatomy back.
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


_UNNAMED_CALLS = {
    "computer_call": "computer",
    "apply_patch_call": "apply_patch",
    "tool_search_call": "tool_search",
}
"""The tool name of a call block that names none (a built-in Responses tool's)."""


def keeps_form(message: BaseMessage) -> bool:
    """Whether a tool result must be sent in its own form, never as a text brief.

    An OpenAI ``computer_call_output`` (a ``ToolMessage`` langchain-openai sends as
    one) must hold a screenshot: sent as text, langchain-openai would send it as a
    function's output, which the API refuses for a computer call.
    """
    return isinstance(message, ToolMessage) and (
        message.additional_kwargs.get("type") == "computer_call_output"
    )


def _block_call(block: dict[str, Any], position: int) -> Call:
    args_key = CALL_BLOCKS[block["type"]][1]
    name = block.get("name")
    args = block.get(args_key, {})
    if block["type"] in TEXT_INPUT_CALLS and isinstance(args, str):
        args = {"__arg1": args}  # free-form input, as ``tool_calls`` lists it
    return Call(
        block_call_id(block),
        name if isinstance(name, str) and name else _UNNAMED_CALLS.get(block["type"], "tool"),
        parsed_arguments(args),
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
    legacy = legacy_call(message)
    if legacy is not None:
        name = legacy.get("name")
        calls.append(
            Call(
                legacy_call_id(name),
                name if isinstance(name, str) and name else "tool",
                parsed_arguments(legacy.get("arguments", {})),
                "function_call",
            )
        )
    return calls


def build(message: BaseMessage) -> Anatomy:
    """Parse ``message`` (see :class:`Anatomy`)."""
    content = message.content
    texts: list[tuple[int | None, str]] = []
    results: list[Result] = []
    reasoning: list[int] = []
    counted: list[str] = []
    costs = [0, 0, 0]  # images, media at a fixed cost, fixed tokens
    # A ToolMessage or FunctionMessage is one result (its whole content); an
    # AIMessage answers none.
    answers = not isinstance(message, (AIMessage, *RESULT_MESSAGES))
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
                text = block if isinstance(block, str) else block.get(TEXT_KEYS[block["type"]])
                if isinstance(text, str):
                    texts.append((position, text))
            elif kind == "reasoning":
                reasoning.append(position)
            elif kind == "result" and answers and isinstance(block, dict):
                key = RESULT_BLOCKS[block["type"]]
                cid = block.get(key)
                if cid:
                    inner = RESULT_CONTENT.get(block["type"])  # None: no text result
                    text, others = result_text(None if inner is None else block.get(inner))
                    error = block.get("is_error") is True
                    results.append(Result(str(cid), text, error, position, tuple(others)))
            cost = block_parts(block, counted, listed)
            costs[0] += kind == "image"
            costs[1] += kind == "media" and cost == FILE_TOKENS
            costs[2] += cost
    if isinstance(message, RESULT_MESSAGES):
        text = "\n".join(t for _, t in texts)
        error = isinstance(message, ToolMessage) and message.status == "error"
        results.append(Result(result_message_id(message), text, error, None))
    call_texts: list[str] = []
    if isinstance(message, AIMessage):
        call_texts = [call_text(call) for call in message.tool_calls]
        call_texts += [invalid_call_text(bad) for bad in message.invalid_tool_calls]
        legacy = legacy_call(message)
        if legacy is not None:
            call_texts.append(legacy_call_text(legacy))
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
