"""Thresholds: a token count, or a share of the agent model's input window."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["Threshold", "check_threshold", "resolve_threshold"]

Threshold = int | tuple[str, float]
"""A token count, or ``("fraction", share)`` of the agent model's ``max_input_tokens``."""


def check_threshold(threshold: Any) -> None:
    """Check the shape of a threshold without resolving it.

    Raises:
        ValueError: unless ``threshold`` is a positive int or ``("fraction", share)``
            with ``0 < share <= 1``.
    """
    if isinstance(threshold, int) and not isinstance(threshold, bool):
        if threshold < 1:
            raise ValueError(f"threshold must be a positive int, got {threshold!r}")
        return
    if isinstance(threshold, tuple) and len(threshold) == 2 and threshold[0] == "fraction":
        share = threshold[1]
        if (
            isinstance(share, int | float)
            and not isinstance(share, bool)
            and math.isfinite(share)
            and 0 < share <= 1
        ):
            return
        raise ValueError(f"threshold=('fraction', share) needs 0 < share <= 1, got {share!r}")
    raise ValueError(
        f"threshold must be a token count (int) or ('fraction', share), got {threshold!r}"
    )


def resolve_threshold(threshold: Threshold, model: Any = None) -> int:
    """Return the token budget a threshold stands for.

    Args:
        threshold: a token count, or ``("fraction", share)``: that share of the
            agent model's ``model.profile["max_input_tokens"]``.
        model: the agent's chat model; needed only for a fraction.

    Raises:
        ValueError: for a malformed threshold, or a fraction without a model whose
            profile gives ``max_input_tokens``.

    Example:
        >>> resolve_threshold(32000)
        32000
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> model = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 128000})
        >>> resolve_threshold(("fraction", 0.8), model)
        102400
    """
    check_threshold(threshold)
    if isinstance(threshold, int):
        return threshold
    share = float(threshold[1])
    if model is None:
        raise ValueError(
            f"threshold=('fraction', {share}) is a share of the agent model's "
            "profile['max_input_tokens']: pass the agent's chat model (agent_model=...), "
            "or an int threshold"
        )
    profile = getattr(model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        name = type(model).__name__
        raise ValueError(
            f"threshold=('fraction', {share}) needs the agent model's "
            f"profile['max_input_tokens'], which this {name} does not declare "
            f"(profile={profile!r}); pass an int threshold, or give the model one: "
            f"{name}(..., profile={{'max_input_tokens': ...}})"
        )
    return max(1, math.floor(limit * share))
