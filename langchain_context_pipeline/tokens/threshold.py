"""Thresholds: a token count, or a share of the agent model's input window.

The forms are those of LangChain's ``SummarizationMiddleware`` (``trigger=``):
``("tokens", n)`` or a plain int ``n`` for a count, ``("fraction", share)`` for a
share of the agent model's ``profile["max_input_tokens"]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "Threshold",
    "check_threshold",
    "model_window",
    "normalize_threshold",
    "resolve_threshold",
    "token_count",
    "window_warning",
]

Threshold = int | tuple[str, float]
"""A token count (``n`` or ``("tokens", n)``), or ``("fraction", share)`` of the agent
model's ``max_input_tokens``."""

_FORMS = "a token count (int or ('tokens', n)) or ('fraction', share)"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def token_count(value: Any, name: str = "threshold", minimum: int = 1) -> int:
    """Return the token count ``value`` gives: an int, or ``("tokens", n)``.

    Args:
        value: the setting as given.
        name: the argument's name, for the error.
        minimum: the smallest count allowed.

    Raises:
        ValueError: naming ``name`` and ``value`` for anything else.

    Example:
        >>> token_count(("tokens", 5000)), token_count(5000)
        (5000, 5000)
    """
    pair = isinstance(value, tuple) and len(value) == 2 and value[0] == "tokens"
    count = value[1] if pair else value
    if not _is_int(count) or count < minimum:
        raise ValueError(
            f"{name} must be an int >= {minimum} or ('tokens', n) with n >= {minimum}, "
            f"got {value!r}"
        )
    return int(count)


def normalize_threshold(threshold: Any, name: str = "threshold") -> int | tuple[str, float]:
    """Return ``threshold`` as an int, or as ``("fraction", share)`` with a float share.

    Raises:
        ValueError: naming ``name`` and the value, unless ``threshold`` is a positive
            int, ``("tokens", n)`` with ``n >= 1``, or ``("fraction", share)`` with
            ``0 < share <= 1``.

    Example:
        >>> normalize_threshold(("tokens", 5000)), normalize_threshold(("fraction", 0.8))
        (5000, ('fraction', 0.8))
    """
    if isinstance(threshold, tuple) and len(threshold) == 2 and threshold[0] == "fraction":
        share = threshold[1]
        number = _is_int(share) or isinstance(share, float)
        if number and math.isfinite(share) and 0 < share <= 1:
            return ("fraction", float(share))
        raise ValueError(f"{name}=('fraction', share) needs 0 < share <= 1, got {threshold!r}")
    if _is_int(threshold) or (isinstance(threshold, tuple) and threshold[:1] == ("tokens",)):
        return token_count(threshold, name)
    if isinstance(threshold, tuple) and len(threshold) == 2 and threshold[0] == "messages":
        raise ValueError(
            f"{name}={threshold!r}: a message count is not a budget this pipeline can keep; "
            f"give {_FORMS}"
        )
    raise ValueError(f"{name} must be {_FORMS}, got {threshold!r}")


def check_threshold(threshold: Any) -> None:
    """Check the shape of a threshold without resolving it.

    Raises:
        ValueError: unless ``threshold`` is a positive int, ``("tokens", n)`` or
            ``("fraction", share)`` with ``0 < share <= 1``.
    """
    normalize_threshold(threshold)


def model_window(model: Any) -> int | None:
    """Return the chat model's ``profile["max_input_tokens"]``, or ``None`` if it gives none."""
    profile = getattr(model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return limit if isinstance(limit, int) and _is_int(limit) and limit >= 1 else None


def resolve_threshold(threshold: Threshold, model: Any = None) -> int:
    """Return the token budget a threshold stands for.

    Args:
        threshold: a token count (``n`` or ``("tokens", n)``), or
            ``("fraction", share)``: that share of the agent model's
            ``model.profile["max_input_tokens"]``.
        model: the agent's chat model; needed only for a fraction.

    Raises:
        ValueError: for a malformed threshold, or a fraction without a model whose
            profile gives ``max_input_tokens``.

    Example:
        >>> resolve_threshold(32000), resolve_threshold(("tokens", 5000))
        (32000, 5000)
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> model = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 128000})
        >>> resolve_threshold(("fraction", 0.8), model)
        102400
    """
    value = normalize_threshold(threshold)
    if isinstance(value, int):
        return value
    share = value[1]
    if model is None:
        raise ValueError(
            f"threshold=('fraction', {share}) is a share of the agent model's "
            "profile['max_input_tokens']: pass the agent's chat model (agent_model=...), "
            "or an int threshold"
        )
    limit = model_window(model)
    if limit is None:
        name = type(model).__name__
        raise ValueError(
            f"threshold=('fraction', {share}) needs the agent model's "
            f"profile['max_input_tokens'], which this {name} does not declare "
            f"(profile={getattr(model, 'profile', None)!r}); pass an int threshold, or give "
            f"the model one: {name}(..., profile={{'max_input_tokens': ...}})"
        )
    return max(1, math.floor(limit * share))


def window_warning(threshold: int, model: Any) -> str | None:
    """Return why ``threshold`` can never compress for ``model``, or ``None`` if it can.

    A threshold above the model's ``profile["max_input_tokens"]`` lets every request
    between the two through uncompressed, and the provider rejects them.
    """
    window = model_window(model)
    if window is None or threshold <= window:
        return None
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    shown = type(model).__name__ + (f" {name!r}" if isinstance(name, str) else "")
    return (
        f"threshold {threshold} is above the agent model's window, "
        f"profile['max_input_tokens'] = {window} ({shown}): a request between the two "
        "is sent uncompressed and the model rejects it; give a threshold of at most "
        f"{window}, or ('fraction', 0.8)"
    )
