"""Checks of settings, shared by every configurable piece."""

from __future__ import annotations

from typing import Any


def check_int(name: str, value: Any, minimum: int = 0) -> None:
    """Raise a ValueError naming ``name`` unless ``value`` is an int >= ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
