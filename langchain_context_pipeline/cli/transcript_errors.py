"""The one-line error for a transcript that cannot be read, and how its text is phrased.

:class:`TranscriptError` names the file, the place in it and what is wrong. The
helpers here turn JSON values and the exceptions langchain-core and pydantic raise
on malformed message data into short, single-line phrases for it.

Example:
    >>> str(TranscriptError("expected x, got y", "x", "chat.json", "message 3"))
    'chat.json: message 3: expected x, got y'
    >>> describe(KeyError("tool_call_id"))
    'missing key "tool_call_id"'
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

__all__ = ["TranscriptError", "describe", "json_type", "keys_of"]

# A langchain-core message longer than this is cut to its first sentence, then to
# this length: some quote the whole offending message dict.
_DESCRIBE_LIMIT = 200
_KEY_LIMIT = 60


class TranscriptError(ValueError):
    """A mistake in a transcript: the file cannot be read as a conversation.

    ``str(err)`` is one line: the path, the position when known and the problem,
    e.g. ``transcript.json: message 5: expected a message object with a "role"
    or "type" key, got a number``.

    Attributes:
        problem: What is wrong, without path or position.
        expected: What a valid transcript has at that place.
        path: The file (or the ``source`` given to ``parse_transcript``).
        position: Where in the file, e.g. ``"line 3"``, ``"message 5"`` (the
            0-based index in the list of messages) or ``"line 2 column 7"``;
            ``None`` when the problem concerns the whole file.
    """

    def __init__(
        self,
        problem: str,
        expected: str,
        path: str | None = None,
        position: str | None = None,
    ) -> None:
        """Create the error.

        Args:
            problem: What is wrong; line breaks are folded into spaces.
            expected: What a valid transcript has at that place.
            path: The file the problem is in.
            position: Where in the file.
        """
        self.problem = " ".join(problem.split())
        self.expected = expected
        self.path = path
        self.position = position
        super().__init__(self.problem)

    def __str__(self) -> str:
        """Return ``path: position: problem``, leaving out the parts that are unknown."""
        return ": ".join(part for part in (self.path, self.position, self.problem) if part)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with all four fields (the default would keep only the message)."""
        return (type(self), (self.problem, self.expected, self.path, self.position))


def describe(err: BaseException) -> str:
    """Say in one short line why langchain-core refused a message.

    Args:
        err: What ``convert_to_messages``, ``messages_from_dict`` or ``load`` raised.

    Returns:
        For a pydantic error, the first failing field and why; for a ``KeyError``,
        the missing key; otherwise the first line of the message (langchain-core
        puts a troubleshooting link on the next one), cut to its first sentence
        and to about 200 characters when it is longer than that.
    """
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    if isinstance(err, KeyError):
        return f"missing key {json.dumps(str(err.args[0]))}" if err.args else "missing key"
    lines = str(err).strip().splitlines()
    text = lines[0].strip() if lines else type(err).__name__
    if len(text) > _DESCRIBE_LIMIT:
        text = text.split(". ", 1)[0]
    if len(text) > _DESCRIBE_LIMIT:
        text = text[: _DESCRIBE_LIMIT - 1] + "…"
    return text


def json_type(value: Any) -> str:
    """Name a parsed JSON value's type as JSON does: ``"a number"``, ``"null"``, ...

    Args:
        value: A value from ``json.loads``.

    Returns:
        The JSON type with its article.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def keys_of(value: dict[str, Any]) -> str:
    """List an object's first five keys as they appear in the file.

    Args:
        value: A JSON object.

    Returns:
        The quoted keys, e.g. ``"conversation", "model"``, or ``(none)``.
    """
    if not value:
        return "(none)"
    names = [_quoted(str(key)) for key in list(value)[:5]]
    return ", ".join(names) + (", …" if len(value) > 5 else "")


def _quoted(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted if len(quoted) <= _KEY_LIMIT else quoted[: _KEY_LIMIT - 1] + "…"
