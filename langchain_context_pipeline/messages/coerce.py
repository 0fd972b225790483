"""Input coercion: what the pipeline accepts as a conversation, read as messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue


def coerce_messages(value: Any) -> list[BaseMessage]:
    """Return ``value`` as a list of messages; a list of messages is returned as is.

    Accepts a sequence of ``BaseMessage``, OpenAI-style dicts, ``(role, text)``
    tuples or strings, and a ``PromptValue``.

    Raises:
        TypeError: naming the index and type of the first item that is not a message.
    """
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, BaseMessage | str | bytes | dict) or not isinstance(value, Sequence):
        raise TypeError(f"expected a list of messages or a PromptValue, got {type(value).__name__}")
    if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
        return value
    out: list[BaseMessage] = []
    for index, item in enumerate(value):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        if not isinstance(item, dict | tuple | str):
            raise TypeError(
                f"messages[{index}] is {type(item).__name__}, expected a BaseMessage, "
                "an OpenAI-style dict, a (role, content) tuple or a string"
            )
        # convert_to_messages does the reading; its errors get the item's index.
        try:
            out.extend(convert_to_messages([item]))
        except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
            raise TypeError(f"messages[{index}] cannot be read as a message: {exc}") from exc
    return out
