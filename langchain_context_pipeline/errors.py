"""The errors the pipeline raises on purpose, and the check of its integer settings.

Every error of the pipeline's own is a :class:`ContextPipelineError`, so one
``except ContextPipelineError`` catches them all; each also derives from the
built-in error it refines (``ValueError``, ``TimeoutError``), so code that caught
those keeps working.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BudgetError", "ContextPipelineError", "SummaryTimeoutError", "check_int"]


class ContextPipelineError(Exception):
    """The base of every error the pipeline raises on purpose."""


class BudgetError(ContextPipelineError, ValueError):
    """The messages that can never be dropped exceed the token budget by themselves.

    Raised when the system messages alone (or, with everything else cut to its
    minimum, what must be kept) are larger than the budget: the pipeline never
    returns more than the budget silently.
    """

    def __init__(self, message: str, *, required: int, budget: int) -> None:
        """Record the sizes.

        Args:
            message: what was too large, with its size and the budget.
            required: tokens of what cannot be dropped.
            budget: the budget in tokens.
        """
        super().__init__(message)
        self.required = required
        self.budget = budget


class SummaryTimeoutError(ContextPipelineError, TimeoutError):
    """The summarizer did not answer within ``summary_timeout`` seconds.

    The Condenser never lets it escape a pass: the digest stands in, and the
    report's ``condense.failure`` names it (``"SummaryTimeoutError: ..."``).
    """


def check_int(name: str, value: Any, minimum: int = 0) -> None:
    """Raise a ValueError naming ``name`` unless ``value`` is an int >= ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
