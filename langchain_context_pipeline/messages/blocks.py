"""Content-block knowledge: which parts of a message carry tool calls, results, reasoning.

Every format the input coercion accepts is read here, and only here:

- LangChain: ``AIMessage.tool_calls`` / ``invalid_tool_calls`` (``id``, ``args``)
  and ``ToolMessage.tool_call_id``;
- OpenAI chat: ``additional_kwargs["tool_calls"]`` (``id``, ``function.arguments``
  as a JSON string);
- Anthropic: assistant ``tool_use`` blocks (``id``, ``input``) and user
  ``tool_result`` blocks (``tool_use_id``);
- OpenAI Responses: ``function_call`` blocks (``call_id``, ``arguments`` as a JSON
  string) and ``function_call_output`` blocks (``call_id``);
- LangChain v1 standard blocks: ``tool_call`` blocks (``id``, ``args``);
- legacy OpenAI functions: ``additional_kwargs["function_call"]`` (``name``,
  ``arguments`` as a JSON string; no id) and ``FunctionMessage`` (its ``name``),
  paired by the function's name (see
  :func:`~langchain_context_pipeline.messages.parse.legacy_call_id`).

Reasoning blocks (``thinking``, ``redacted_thinking``, ``reasoning``) are never
edited, only kept whole or dropped whole, because that is what the providers accept:

- Anthropic checks the ``signature`` of a ``thinking`` block (and the ``data`` of a
  ``redacted_thinking`` block): an altered block is rejected. In a tool loop with
  extended thinking, the assistant turn that made the pending tool calls must keep
  its blocks unchanged; the blocks of earlier turns may be left out (the API strips
  them from the context anyway).
- OpenAI Responses ``reasoning`` items (with ``encrypted_content``) may be left out
  of earlier turns; an edited one is rejected.
- LangChain v1 ``reasoning`` blocks follow the provider they came from.

So the pipeline keeps reasoning blocks byte-identical in every message it keeps
verbatim, and drops them whole (newest turn last) only when nothing else can give.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, FunctionMessage, ToolMessage

from langchain_context_pipeline.messages import anatomy, parts
from langchain_context_pipeline.messages.kinds import (
    CALL_BLOCKS,
    REASONING_BLOCKS,
    RESULT_BLOCKS,
    RESULT_CONTENT,
    TEXT_INPUT_CALLS,
    block_type,
)

__all__ = [
    "CALL_BLOCKS",
    "REASONING_BLOCKS",
    "RESULT_BLOCKS",
    "RESULT_CONTENT",
    "block_call_id",
    "block_type",
    "call_ids",
    "call_index",
    "cut_call_arguments",
    "is_reasoning",
    "pair_results",
    "paired_call",
    "result_ids",
    "result_parts",
]


def is_reasoning(block: Any) -> bool:
    """Return whether ``block`` is a reasoning block."""
    return block_type(block) in REASONING_BLOCKS


def block_call_id(block: Any) -> str | None:
    """Return the call id of a tool-call block, or None for any other block."""
    if block_type(block) not in CALL_BLOCKS:
        return None
    return parts.block_call_id(block) or None


def call_ids(message: BaseMessage) -> list[str]:
    """Return the ids of the tool calls an AIMessage makes, in every format, once each."""
    if not isinstance(message, AIMessage):
        return []
    return anatomy.call_ids(message)


def result_ids(message: BaseMessage) -> list[str]:
    """Return the ids of the tool calls a message answers, in every format, once each.

    A ``ToolMessage`` answers its ``tool_call_id``, a legacy ``FunctionMessage`` the
    legacy call of its name; any other message that is not an AIMessage answers the
    calls of its ``tool_result`` / ``function_call_output`` blocks.
    """
    if isinstance(message, AIMessage):
        return []
    if isinstance(message, ToolMessage):
        cid = message.tool_call_id
        return [cid] if isinstance(cid, str) and cid else []
    if isinstance(message, FunctionMessage):
        return [anatomy.legacy_call_id(message.name)]
    if isinstance(message.content, str):
        return []
    return anatomy.read(message).result_ids()


def result_parts(block: Any) -> tuple[str, list[Any]]:
    """Return the text of a tool-result block's result and its other parts.

    The result is a string, or a list of content blocks (Anthropic: text, image,
    document...): the text is the string or its text blocks joined by newlines;
    the other parts are the remaining blocks (or a non-string, non-list result).
    """
    kind = block_type(block)
    if kind not in RESULT_CONTENT:
        return "", []
    return anatomy.result_text(block.get(RESULT_CONTENT[kind]))


def call_index(message: BaseMessage) -> dict[str, tuple[str, Any]]:
    """Return ``{call id: (tool name, arguments)}`` of the calls an AIMessage makes.

    ``tool_calls`` first, then the calls only a content block carries (Anthropic
    ``tool_use``, Responses ``function_call`` with its JSON ``arguments`` read,
    v1 ``tool_call``) or only OpenAI-style ``additional_kwargs["tool_calls"]`` does.
    """
    if not isinstance(message, AIMessage):
        return {}
    return anatomy.call_index(message)


def pair_results(messages: Sequence[BaseMessage]) -> dict[int, list[int]]:
    """Map each message that answers a call to the index of the message making that call.

    The package's one pairing rule. Each result goes to the *nearest preceding
    open* call of its id, so a server that reuses an id (say ``"0"``) across turns
    pairs every result with its own call; a second result for an answered call
    goes with that call (it cannot be sent without it). Returns
    ``{result index: [call message indices]}``; a result whose call is absent maps
    to nothing.
    """
    open_calls: dict[str, list[int]] = {}
    last_call: dict[str, int] = {}
    pairs: dict[int, list[int]] = {}
    answering = anatomy.RESULT_MESSAGES
    for index, message in enumerate(messages):
        # A ToolMessage (or FunctionMessage) answers and makes no call; an AIMessage
        # makes calls and answers none; any other message with string content does
        # neither.
        if isinstance(message, AIMessage):
            for cid in anatomy.call_ids(message):
                open_calls.setdefault(cid, []).append(index)
                last_call[cid] = index
            continue
        if not isinstance(message, answering) and isinstance(message.content, str):
            continue
        for cid in result_ids(message):
            stack = open_calls.get(cid)
            start = stack.pop() if stack else last_call.get(cid)
            if start is not None:
                pairs.setdefault(index, []).append(start)
    return pairs


def paired_call(
    messages: Sequence[BaseMessage],
    index: int,
    pairs: Mapping[int, list[int]] | None = None,
    indexes: dict[int, dict[str, tuple[str, Any]]] | None = None,
) -> dict[str, tuple[str, Any]]:
    """Return ``{call id: (name, args)}`` of the calls the message at ``index`` answers.

    The calls are those :func:`pair_results` pairs it with (pass ``pairs`` when
    already computed); an id whose call is absent is not in the result.
    ``indexes``: :func:`call_index` of the call messages by position, filled as they
    are read (pass one dict for every message of a list, so that a call message
    answered by several results is read once).
    """
    pairs = pair_results(messages) if pairs is None else pairs
    wanted = set(result_ids(messages[index]))
    found: dict[str, tuple[str, Any]] = {}
    for start in pairs.get(index, ()):
        calls = None if indexes is None else indexes.get(start)
        if calls is None:
            calls = call_index(messages[start])
            if indexes is not None:
                indexes[start] = calls
        for cid, call in calls.items():
            if cid in wanted:
                found.setdefault(cid, call)
    return found


def _cut_arguments(value: Any, cut: Callable[[Any], Any]) -> Any:
    """Cut one copy of arguments: a JSON-like value, or a JSON string of one."""
    if not isinstance(value, str):
        return cut(value)
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        out = cut(value)
        return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
    if isinstance(parsed, str):
        return json.dumps(cut(parsed), ensure_ascii=False)
    cut_value = cut(parsed)
    if cut_value == parsed:
        return value  # untouched: keep the provider's own bytes
    return json.dumps(cut_value, ensure_ascii=False)


def cut_call_arguments(message: AIMessage, cut: Callable[[Any], Any]) -> AIMessage:
    """Return ``message`` with ``cut`` applied to every copy of its tool-call arguments.

    ``tool_calls`` (dicts), ``invalid_tool_calls`` (strings), tool-call content
    blocks (``input``/``args`` dicts, ``arguments`` JSON strings, a custom tool's
    free-form ``input``, cut as text, its ``tool_calls`` entry alike), OpenAI-style
    ``additional_kwargs["tool_calls"]`` and a legacy ``additional_kwargs["function_call"]``
    are all cut, so no provider is sent the
    original. ``cut`` must be a fixed point. Returns ``message`` itself when
    nothing changes.
    """
    update: dict[str, Any] = {}
    # A free-form input (see TEXT_INPUT_CALLS) is cut as the text it is; the
    # ``tool_calls`` entry that lists it as ``{"__arg1": input}`` takes the same cut.
    listed = {c.get("id"): c["args"] for c in message.tool_calls}
    text_inputs: dict[Any, str] = {}
    if not isinstance(message.content, str):
        blocks: list[Any] = []
        for block in message.content:
            kind = block_type(block)
            if isinstance(block, dict) and kind in CALL_BLOCKS and CALL_BLOCKS[kind][1] in block:
                key = CALL_BLOCKS[kind][1]
                value = block[key]
                if kind in TEXT_INPUT_CALLS and isinstance(value, str):
                    cut_text = cut(value)
                    if not isinstance(cut_text, str):
                        cut_text = json.dumps(cut_text, ensure_ascii=False)
                    cid = block_call_id(block)
                    if listed.get(cid) == {"__arg1": value}:
                        text_inputs[cid] = cut_text
                    block = {**block, key: cut_text}
                else:
                    block = {**block, key: _cut_arguments(value, cut)}
            blocks.append(block)
        if blocks != message.content:
            update["content"] = blocks
    calls = [
        {**c, "args": {"__arg1": text_inputs[c.get("id")]}}
        if c.get("id") in text_inputs
        else {**c, "args": cut(c["args"])}
        for c in message.tool_calls
    ]
    if calls != message.tool_calls:
        update["tool_calls"] = calls
    invalid = [
        {**c, "args": _cut_arguments(c["args"], cut)} if isinstance(c.get("args"), str) else c
        for c in message.invalid_tool_calls
    ]
    if invalid != message.invalid_tool_calls:
        update["invalid_tool_calls"] = invalid
    raw_calls = message.additional_kwargs.get("tool_calls")
    if isinstance(raw_calls, list):
        raw_out: list[Any] = []
        for raw in raw_calls:
            fn = raw.get("function") if isinstance(raw, dict) else None
            if isinstance(fn, dict) and "arguments" in fn:
                raw = {**raw, "function": {**fn, "arguments": _cut_arguments(fn["arguments"], cut)}}
            raw_out.append(raw)
        if raw_out != raw_calls:
            update["additional_kwargs"] = {**message.additional_kwargs, "tool_calls": raw_out}
    legacy = anatomy.legacy_call(message)
    if legacy is not None and "arguments" in legacy:
        cut_legacy = _cut_arguments(legacy["arguments"], cut)
        if cut_legacy != legacy["arguments"]:
            kwargs = update.get("additional_kwargs", message.additional_kwargs)
            update["additional_kwargs"] = {
                **kwargs,
                "function_call": {**legacy, "arguments": cut_legacy},
            }
    return message.model_copy(update=update) if update else message
