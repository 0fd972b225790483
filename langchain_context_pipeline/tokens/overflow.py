"""Recognise a provider's context-length error and read how far over the request was."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["OVERFLOW_TIGHTENING", "Overflow", "overflow_of", "shrink_factor"]

OVERFLOW_TIGHTENING = 1.25
"""How far a request is shrunk after a context-length error that reports no sizes."""

_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "input tokens exceed the configured limit",
    "exceeds the context window",
    "contextwindowexceedederror",
)
# (pattern, group of the window, group of the request's size)
_SIZES: tuple[tuple[re.Pattern[str], int, int], ...] = (
    # OpenAI: "maximum context length is 8192 tokens. However, your messages resulted in 9000"
    (re.compile(r"maximum context length is (\d+) tokens.*?resulted in (\d+) tokens", re.S), 1, 2),
    # OpenAI Responses: "configured limit of 272000 tokens. Your messages resulted in 300000 tokens"
    (re.compile(r"limit of (\d+) tokens.*?resulted in (\d+) tokens", re.S), 1, 2),
    # Anthropic: "prompt is too long: 208000 tokens > 200000 maximum"
    (re.compile(r"(\d+) tokens > (\d+) maximum"), 2, 1),
)


@dataclass(frozen=True)
class Overflow:
    """A context-length error: the window and the request's size, when it says them."""

    window: int | None = None
    requested: int | None = None


def _context_overflow_type() -> type[BaseException] | None:
    try:
        from langchain_core.exceptions import ContextOverflowError
    except ImportError:  # older langchain-core
        return None
    return ContextOverflowError


def overflow_of(error: BaseException) -> Overflow | None:
    """Return the :class:`Overflow` that ``error`` reports, or ``None`` for any other error.

    Recognised: LangChain's ``ContextOverflowError`` (where langchain-core has it),
    OpenAI's ``context_length_exceeded`` and Anthropic's ``prompt is too long``.
    """
    kind = _context_overflow_type()
    text = str(error)
    lowered = text.lower()
    if not (kind is not None and isinstance(error, kind)) and not any(
        marker in lowered for marker in _MARKERS
    ):
        return None
    for pattern, window, requested in _SIZES:
        found = pattern.search(text)
        if found:
            return Overflow(int(found.group(window)), int(found.group(requested)))
    return Overflow()


def shrink_factor(requested: int | None, window: int | None, margin: float) -> float:
    """Return the factor a rejected request must shrink by: its overshoot, or a fixed step.

    The overshoot ``requested / window`` (times ``margin``) when the error said both
    and the request was over; sizes that do not show an overshoot (a request within
    the window, rejected for the room the reply needs) say nothing of how far to go,
    so :data:`OVERFLOW_TIGHTENING` applies.
    """
    if requested and window and requested > window:
        return requested / window * margin
    return OVERFLOW_TIGHTENING
