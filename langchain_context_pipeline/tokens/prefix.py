"""Digests of a request's prefixes: which part of a request repeats one the provider counted."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.messages.values import dumps

__all__ = ["prefix_digests", "stable_text"]


def stable_text(value: Any) -> str:
    """A stable text of ``value`` for a digest: any value, alike in every process."""
    return dumps(value, sort_keys=True)


def _message_text(message: BaseMessage) -> str:
    """What the provider reads of a message: role, name, content, tool calls, call id."""
    return stable_text(
        [
            message.type,
            getattr(message, "role", None),
            message.name,
            message.content,
            getattr(message, "tool_calls", None),
            getattr(message, "tool_call_id", None),
        ]
    )


def prefix_digests(seed: str, messages: Sequence[BaseMessage]) -> list[str]:
    """Return the digest of every prefix of a request: ``[i]`` covers its first ``i`` messages.

    ``[0]`` is the digest of the request's overhead alone (``seed``, from
    :func:`request_seed`); each next one chains the next message onto it.
    """
    chain = hashlib.sha256(seed.encode())
    digests = [chain.hexdigest()[:16]]
    for message in messages:
        chain.update(b"\x00" + _message_text(message).encode("utf-8", "surrogatepass"))
        digests.append(chain.hexdigest()[:16])
    return digests
