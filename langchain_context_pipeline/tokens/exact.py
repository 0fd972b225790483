"""``token_counter="exact"``: the agent model's own tokenizer, when one is at hand offline.

For a chat model (or a model name), :func:`exact_token_counter` counts with:

1. the tiktoken encoding of an OpenAI model name (``gpt-4o``, ``gpt-4.1``, ``gpt-5``
   and the ``o`` series: o200k_base; ``gpt-4``, ``gpt-3.5``: cl100k_base), served
   offline (see :mod:`langchain_context_pipeline.tokens.encodings`);
2. else the model's own ``get_num_tokens_from_messages``, when its class defines
   one that counts locally;
3. else, with ``fallback=True`` (what ``"exact"`` does), the default estimate, with
   one warning naming the model; with ``fallback=False``, a ``ValueError``.

Every counter charges the same parts of a message (see
:func:`~langchain_context_pipeline.tokens.counters.countable_parts`) and 4 tokens of
framing per message, so an exact count differs from the estimate only in how a
text is counted; an OpenAI encoding's count adds the 3 tokens OpenAI's chat format
spends on every request to prime the reply.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.tokens.counters import (
    TokenCounter,
    _model_counter,
    current_model_counter,
    estimate_tokens,
    tiktoken_counter,
)
from langchain_context_pipeline.tokens.encodings import OFFLINE_HINT, encoding_for_model_name

__all__ = ["exact_model_counter", "exact_token_counter", "primed"]

logger = logging.getLogger("langchain_context_pipeline")

# Packages whose chat models define get_num_tokens_from_messages without counting
# exactly offline: langchain-openai's guesses cl100k_base for a name it does not know
# (an OpenAI name is served by rule 1 first), langchain-anthropic's calls the API, and
# langchain-aws's Bedrock models call Bedrock's count_tokens (else a GPT-2 guess).
_NOT_LOCAL = ("langchain_openai", "langchain_anthropic", "langchain_aws")

_KEPT = 32
_lock = threading.Lock()
_counters: dict[tuple[Any, ...], TokenCounter] = {}


def _model_name(model: Any) -> str | None:
    if isinstance(model, str):
        return model
    from langchain_context_pipeline.tokens.calibration import model_identity

    name = model_identity(model)[1]
    for attribute in ("model_name", "model"):
        if name is None and isinstance(getattr(model, attribute, None), str):
            name = getattr(model, attribute)
    return name


def _counts_locally(model: Any) -> bool:
    """Whether ``model``'s class defines its own ``get_num_tokens_from_messages``."""
    from langchain_core.language_models import BaseChatModel, BaseLanguageModel

    if not isinstance(model, BaseChatModel):
        return False
    own: Any = type(model).get_num_tokens_from_messages
    defaults: tuple[Any, ...] = (
        BaseChatModel.get_num_tokens_from_messages,
        BaseLanguageModel.get_num_tokens_from_messages,
    )
    return own not in defaults and not type(model).__module__.startswith(_NOT_LOCAL)


REPLY_PRIMING_TOKENS = 3
"""Tokens OpenAI's chat format adds to every request to prime the reply."""


def primed(counter: TokenCounter) -> TokenCounter:
    """Add the reply's priming to a count of messages in OpenAI's chat format.

    Asked about one message, the counter charges the priming too: a sum of
    per-message counts only overestimates a request, never underestimates it.
    """

    def count(messages: Sequence[BaseMessage], /) -> int:
        return counter(messages) + REPLY_PRIMING_TOKENS if messages else 0

    return count


def exact_token_counter(model: Any, *, fallback: bool = False) -> TokenCounter:
    """Return the counter of ``model``'s own tokenizer, available offline.

    Args:
        model: the agent's chat model, or its model name (``"gpt-4o"``).
        fallback: when no exact count is available, return the default estimate
            (:func:`~langchain_context_pipeline.tokens.counters.estimate_tokens`) with a
            warning instead of raising.

    Raises:
        ValueError: (without ``fallback``) when no exact count is available for
            ``model``; the message names it and says what would give one.
        RuntimeError: (without ``fallback``) for an OpenAI name whose encoding is
            neither installed nor downloadable (see
            :func:`~langchain_context_pipeline.tokens.counters.tiktoken_counter`).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> exact_token_counter("gpt-4o")([HumanMessage("hello world")])  # 2 + 4 + 3
        9
    """
    name = _model_name(model)
    encoding = None if name is None else encoding_for_model_name(name)
    if encoding is not None:
        try:
            return primed(tiktoken_counter(encoding))
        except (ImportError, RuntimeError) as exc:
            reason = str(exc)
            if not fallback and isinstance(exc, RuntimeError):
                raise
            if not fallback:
                raise ValueError(f"token_counter='exact' for {name!r}: {reason}") from exc
    elif _counts_locally(model):
        return _model_counter(model)
    else:
        what = repr(model) if isinstance(model, str) else f"{type(model).__name__} {name!r}"
        reason = (
            f"{what} is not an OpenAI model name with a tiktoken encoding, and has no "
            "get_num_tokens_from_messages of its own that counts locally (for OpenAI "
            f"names: {OFFLINE_HINT})"
        )
        if not fallback:
            raise ValueError(f"token_counter='exact': no exact count: {reason}")
    logger.warning(
        "token_counter='exact': no exact count for this model (%s); counting with the "
        "default estimate, which never counts fewer tokens than the common tokenizers",
        reason,
    )
    return estimate_tokens


def _per_model(model: Any) -> TokenCounter:
    """Return the exact counter of ``model`` (or the estimate), built once per model kind."""
    key = (type(model), _model_name(model))
    with _lock:
        counter = _counters.get(key)
    if counter is None:
        counter = exact_token_counter(model, fallback=True)  # warns once per kind
        with _lock:
            _counters[key] = counter
            while len(_counters) > _KEPT:
                _counters.pop(next(iter(_counters)))
    return counter


def exact_model_counter() -> TokenCounter:
    """Return a counter counting exactly with the model of the current call.

    The agent middleware sets the model per request (as for ``token_counter="model"``);
    each model's counter is :func:`exact_token_counter` with ``fallback=True``.

    Raises:
        RuntimeError: (when counting) if no model was set for this call.
    """
    return current_model_counter(
        _per_model,
        "token_counter='exact'",
        "use it through the agent middleware or the hook (agent_model=), "
        "or pass token_counter=exact_token_counter(model)",
    )
