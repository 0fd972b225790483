"""The errors the pipeline raises on purpose."""

from __future__ import annotations

__all__ = ["BudgetError"]


class BudgetError(ValueError):
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
