"""Snapshots of a message's state, so a memo can tell an edited message from the same one.

A memo keyed by a message's identity goes stale when the message is edited in place
(``message.content = ...``, ``message.content[0]["text"] = ...``,
``call["args"]["path"] = ...``, ``call["args"]["tags"].add(...)``, a dataclass's
field set anew). A snapshot is the message's fields read as
:mod:`langchain_context_pipeline.messages.values` reads every value (sets, dataclasses,
pydantic models and other objects included, at any depth), rebuilt as tuples whose
leaves are the very strings and ints the message holds. Comparing two snapshots
compares leaves by identity first (free for the strings that did not change) and by
value otherwise, so it costs one walk over the message's structure, never a pass
over its text, and is exact: no hash that could collide.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.messages.values import snapshot

__all__ = ["message_snapshot", "snapshot"]


def message_snapshot(message: BaseMessage, *more: Any) -> Any:
    """Return a snapshot of every field of ``message`` (extra fields too), and of ``more``."""
    extra = message.__pydantic_extra__
    return (
        type(message),
        snapshot(message.__dict__),
        snapshot(extra) if extra else None,
        snapshot(more),
    )
