"""Reading one message object of a transcript into a LangChain message.

An item is in one of three layouts (:data:`ItemKind`): an OpenAI chat message, a
``messages_to_dict`` dict or a ``dumpd`` object. langchain-core converts it
(``convert_to_messages``, ``messages_from_dict``, ``load``) and checks a message's
role or type, its content, a tool message's ``tool_call_id``, a function message's
name and a ``dumpd`` item's class; what it raises is wrapped into a
:class:`TranscriptError` naming the position. The hand-written checks here are only
for what it gets wrong for a transcript; each says why.

Example:
    >>> call = {"id": "c1", "function": {"name": "ls", "arguments": "{}"}}
    >>> item = {"role": "assistant", "tool_calls": [call]}
    >>> convert_item(item, item_kind(item, "message 0"), "message 0").tool_calls[0]["name"]
    'ls'
    >>> try:
    ...     convert_item({"role": "robot", "content": "beep"}, "openai", "message 1")
    ... except TranscriptError as err:
    ...     print(err)
    message 1: invalid message: Unexpected message type: 'robot'. Use one of ...
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Literal

from langchain_core.load import load
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
    convert_to_messages,
    messages_from_dict,
)

from langchain_context_pipeline.cli.transcript_errors import (
    TranscriptError,
    describe,
    json_type,
    keys_of,
)

__all__ = ["KIND_NAMES", "ItemKind", "convert_item", "item_kind"]

ItemKind = Literal["openai", "langchain_dict", "langchain_dumpd"]
"""The layout of one message object inside a file."""

KIND_NAMES: dict[ItemKind, str] = {
    "openai": "an OpenAI chat message object",
    "langchain_dict": 'a LangChain message dict ({"type": ..., "data": ...})',
    "langchain_dumpd": 'a serialized LangChain message ({"lc": 1, ...})',
}
"""How error messages name each layout."""

_MESSAGE_OBJECT = 'a message object with a "role" or "type" key'
# Classes a dumpd transcript may revive; load() refuses anything else (models,
# prompts, secrets), because a serialized object's kwargs are executable configuration.
_DUMPD_CLASSES: tuple[type[BaseMessage], ...] = (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
)
# The exceptions langchain_core and pydantic raise on malformed message data.
_CONVERSION_ERRORS = (ValueError, TypeError, KeyError, AttributeError, NotImplementedError)


def item_kind(item: Any, position: str) -> ItemKind:
    """Tell which layout a message object is in, from its keys.

    Args:
        item: One parsed JSON value from the file.
        position: Where it is, for the error.

    Returns:
        The layout.

    Raises:
        TranscriptError: If ``item`` is not an object with ``"role"``, ``"type"``
            or ``"lc"``.
    """
    if not isinstance(item, dict):
        got = json_type(item)
    elif "lc" in item:
        return "langchain_dumpd"
    elif "data" in item and "type" in item and "role" not in item and "content" not in item:
        return "langchain_dict"
    elif "role" in item or "type" in item:
        return "openai"
    else:
        got = f"an object with keys {keys_of(item)}"
    raise TranscriptError(
        f"expected {_MESSAGE_OBJECT}, got {got}", _MESSAGE_OBJECT, position=position
    )


def convert_item(item: dict[str, Any], kind: ItemKind, position: str) -> BaseMessage:
    """Turn one message object into a LangChain message.

    Args:
        item: The message object.
        kind: Its layout, from :func:`item_kind`.
        position: Where it is, for the error.

    Returns:
        The message.

    Raises:
        TranscriptError: If the object is not a valid message in that layout.
    """
    if kind == "openai":
        item = _check_openai_item(item, position)
    try:
        message = _revive(item, kind)
    except _CONVERSION_ERRORS as err:
        raise TranscriptError(
            f"invalid message: {describe(err)}", KIND_NAMES[kind], position=position
        ) from err
    # load() returns what is not a constructor (a secret, "lc": 2) as is; and
    # "remove" is a role and a type langchain-core accepts, but a RemoveMessage is an
    # instruction to delete a message from graph state, not part of a conversation.
    if not isinstance(message, BaseMessage) or isinstance(message, RemoveMessage):
        raise TranscriptError(
            f"expected {KIND_NAMES[kind]}, got {type(message).__name__} after loading",
            KIND_NAMES[kind],
            position=position,
        )
    return message


def _revive(item: dict[str, Any], kind: ItemKind) -> Any:
    if kind == "openai":
        return convert_to_messages([item])[0]
    if kind == "langchain_dict":
        return messages_from_dict([item])[0]
    with warnings.catch_warnings():
        # load() is marked beta and says so once per process; reviving a handful of
        # message classes is not the part of it that may change.
        warnings.filterwarnings("ignore", message=r".*`load` is in beta", category=Warning)
        return load(item, allowed_objects=_DUMPD_CLASSES)


def _check_openai_item(item: dict[str, Any], position: str) -> dict[str, Any]:
    """Check what convert_to_messages gets wrong for an OpenAI transcript.

    Returns:
        ``item``, or a shallow copy with ``"content": None`` added where an
        assistant message that only calls tools leaves it out (OpenAI allows
        that; convert_to_messages requires the key).
    """

    def fail(problem: str, expected: str) -> TranscriptError:
        return TranscriptError(problem, expected, position=position)

    role = item.get("role", item.get("type"))
    is_assistant = role in ("assistant", "ai")
    content = item.get("content")
    # convert_to_messages turns a falsy content (0, false, {}) into "" without a
    # word, and pydantic's first complaint about a list of numbers is "content.str".
    if not (content is None or isinstance(content, str) or _is_part_list(content)):
        expected = '"content" as a string, a list of content parts or null'
        raise fail(f"expected {expected}, got {json_type(content)}", expected)
    tool_calls = item.get("tool_calls")
    if tool_calls is not None:
        # convert_to_messages keeps tool calls on any role, where nothing pairs them.
        if not is_assistant:
            expected = '"tool_calls" only in assistant messages'
            raise fail(f"expected {expected}, got them in a {json.dumps(role)} message", expected)
        # On a malformed tool call it raises a bare KeyError, TypeError or
        # AttributeError that names neither the call nor the field.
        if not isinstance(tool_calls, list):
            expected = '"tool_calls" as a list'
            raise fail(f"expected {expected}, got {json_type(tool_calls)}", expected)
        for index, call in enumerate(tool_calls):
            problem = _tool_call_problem(call)
            if problem is not None:
                expected = "a tool call with an id, a name and arguments as a JSON object"
                raise fail(f"tool call {index}: {problem}", expected)
    if "content" not in item and is_assistant:
        return {**item, "content": None}
    return item


def _is_part_list(content: Any) -> bool:
    return isinstance(content, list) and all(isinstance(part, (str, dict)) for part in content)


def _tool_call_problem(call: Any) -> str | None:
    """Say what is wrong with one tool call (OpenAI or LangChain shape), if anything."""
    if not isinstance(call, dict):
        return f"expected an object, got {json_type(call)}"
    if "function" in call:
        function = call["function"]
        if not isinstance(function, dict):
            return f'expected "function" as an object, got {json_type(function)}'
        name, args, args_key = function.get("name"), function.get("arguments"), "arguments"
    else:
        name, args, args_key = call.get("name"), call.get("args"), "args"
    if not isinstance(name, str):
        return f'expected a "name" string, got {json_type(name)}'
    if "id" not in call or not (call["id"] is None or isinstance(call["id"], str)):
        got = json_type(call["id"]) if "id" in call else "no such key"
        return f'expected an "id" string, got {got}'
    if isinstance(args, str) and args_key == "arguments":
        try:
            args = json.loads(args, strict=False)
        except json.JSONDecodeError as err:
            return f'"arguments" is not valid JSON: {err}'
    if not isinstance(args, dict):
        expected = (
            "a JSON object or a string holding one" if args_key == "arguments" else "an object"
        )
        return f'expected "{args_key}" as {expected}, got {json_type(args)}'
    return None
