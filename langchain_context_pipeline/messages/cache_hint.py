"""Anthropic prompt-cache hint: mark the end of a request's stable prefix.

A provider caches a prefix of the request, message by message. The pipeline's
output starts with a prefix that the next compaction leaves byte-identical: the
head, the carried summary and everything already pruned, condensed or dropped, up
to the protected tail (``CompressionReport.stable_prefix`` messages). Anthropic
caches only up to explicit breakpoints, so :func:`mark_stable_prefix` puts
``cache_control`` on the last content block of that prefix's last message.

It composes with ``langchain_anthropic``'s ``AnthropicPromptCachingMiddleware``
(which marks the system message, the last tool and, through ``model_settings``, the
last message): the breakpoints already in the request are counted and none is added
past Anthropic's limit of :data:`MAX_BREAKPOINTS`, nor a second one on the last
message.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.messages.kinds import MARKABLE_BLOCKS
from langchain_context_pipeline.messages.snapshot import Transient

__all__ = [
    "CACHE_CONTROL",
    "MAX_BREAKPOINTS",
    "PrefixWatch",
    "count_breakpoints",
    "mark_stable_prefix",
]

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""The breakpoint put on the stable prefix's end."""

MAX_BREAKPOINTS = 4
"""Anthropic accepts at most this many ``cache_control`` breakpoints per request."""


def _blocks_marked(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for block in content if isinstance(block, Mapping) and "cache_control" in block)


def count_breakpoints(
    messages: Sequence[BaseMessage],
    system_message: BaseMessage | None = None,
    tools: Sequence[Any] | None = None,
    model_settings: Mapping[str, Any] | None = None,
) -> int:
    """Count the ``cache_control`` breakpoints a request already asks for.

    Counted: marked content blocks of the system message and of the messages, tools
    whose ``extras`` (or dict form) carry ``cache_control``, and a top-level
    ``cache_control`` in ``model_settings`` (the chat model puts it on the last message).
    """
    count = sum(_blocks_marked(m.content) for m in messages)
    if system_message is not None:
        count += _blocks_marked(system_message.content)
    for tool in tools or ():
        extras = tool if isinstance(tool, Mapping) else getattr(tool, "extras", None)
        if isinstance(extras, Mapping) and "cache_control" in extras:
            count += 1
    if model_settings and model_settings.get("cache_control"):
        count += 1
    return count


def _marked(message: BaseMessage, cache_control: Mapping[str, Any]) -> BaseMessage | None:
    """Return a copy of ``message`` with its last markable block marked, or None."""
    content = message.content
    if isinstance(content, str):
        if not content:
            return None
        blocks: list[Any] = [
            {"type": "text", "text": content, "cache_control": dict(cache_control)}
        ]
        return message.model_copy(update={"content": blocks})
    if not content:
        return None
    blocks = list(content)
    last = blocks[-1]
    if isinstance(last, str):
        if not last:
            return None
        blocks[-1] = {"type": "text", "text": last, "cache_control": dict(cache_control)}
    elif isinstance(last, Mapping) and last.get("type") in MARKABLE_BLOCKS:
        blocks[-1] = {**last, "cache_control": dict(cache_control)}
    else:  # thinking blocks and the like take no breakpoint
        return None
    return message.model_copy(update={"content": blocks})


def mark_stable_prefix(
    messages: Sequence[BaseMessage],
    stable_prefix: int,
    *,
    breakpoints: int = 0,
    tail_marked: bool = False,
    cache_control: Mapping[str, Any] = CACHE_CONTROL,
) -> list[BaseMessage] | None:
    """Mark the last message of the stable prefix ``messages[:stable_prefix]``.

    The message's string content becomes one text block; its last content block gets
    ``cache_control``. A message with nothing to mark (empty content, a trailing
    thinking block) passes the mark to the message before it, still in the prefix.
    The caller's messages are not mutated.

    Args:
        messages: the request's messages (the pipeline's output).
        stable_prefix: how many leading messages form the stable prefix.
        breakpoints: breakpoints the request already has (see :func:`count_breakpoints`).
        tail_marked: whether the last message is already marked by other means (a
            top-level ``cache_control``); a mark there would be a second one.
        cache_control: the breakpoint to set.

    Returns:
        The new list, or None when nothing is marked (empty prefix, no room under
        :data:`MAX_BREAKPOINTS`, the prefix already ends at a breakpoint, or its end is
        the last message and that is marked already).
    """
    if stable_prefix <= 0 or breakpoints >= MAX_BREAKPOINTS:
        return None
    end = min(stable_prefix, len(messages))
    for index in range(end - 1, -1, -1):
        if _blocks_marked(messages[index].content):
            return None  # a breakpoint already caches this prefix
        if tail_marked and index == len(messages) - 1:
            return None
        marked = _marked(messages[index], cache_control)
        if marked is not None:
            return [*messages[:index], marked, *messages[index + 1 :]]
    return None


def hint_request(request: Any, stable_prefix: int) -> Any:
    """Return ``request`` (a ``ModelRequest``) with its stable prefix's end marked.

    The request is otherwise unchanged; it comes back as is when nothing is marked.
    """
    settings = request.model_settings or {}
    messages = list(request.messages)
    marked = mark_stable_prefix(
        messages,
        stable_prefix,
        breakpoints=count_breakpoints(messages, request.system_message, request.tools, settings),
        tail_marked=bool(settings.get("cache_control")),
    )
    return request if marked is None else request.override(messages=marked)


class PrefixWatch(Transient):
    """What a provider's prompt cache saw: each request's prefix repeated from the last.

    Remembers each conversation's previous output (the least recently seen
    conversations forgotten past ``size``) and measures how many tokens of the new
    one repeat it message by message from the start, as a provider's prefix cache
    matches. It only reports: nothing it holds changes an output. Safe under threads.
    """

    def __init__(self, size: int = 256) -> None:
        """Remember the previous output of at most ``size`` conversations."""
        self.size = size
        self._last: OrderedDict[str, list[BaseMessage]] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, conversation: str, messages: Sequence[BaseMessage]) -> int | None:
        """Record ``messages`` as ``conversation``'s latest request.

        Returns how many of its leading messages equal, one by one, the
        conversation's previous request's, or None when there was none.
        """
        with self._lock:
            previous = self._last.pop(conversation, None)
            self._last[conversation] = list(messages)
            while len(self._last) > self.size:
                self._last.popitem(last=False)
        if previous is None:
            return None
        repeated = 0
        for old, new in zip(previous, messages, strict=False):
            if old is not new and old != new:
                break
            repeated += 1
        return repeated
