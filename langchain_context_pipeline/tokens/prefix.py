"""What a request sends beside its messages, and digests of its prefixes.

The system prompt and the tool schemas a request sends beside its messages are
counted (:func:`request_overhead`) and digested (:func:`request_seed`); the digest
of every prefix of the request (:func:`prefix_digests`) chains its messages onto
that seed, so calibration can tell which part of a request repeats one the
provider counted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_context_pipeline.messages.values import dumps

__all__ = [
    "prefix_digests",
    "request_digests",
    "request_overhead",
    "request_seed",
    "span_digest",
    "stable_text",
    "tools_tokens",
]

Counter = Callable[[list[BaseMessage]], int]
"""A token counter, as :class:`~langchain_context_pipeline.tokens.counters.TokenCounter` is."""


def stable_text(value: Any) -> str:
    """A stable text of ``value`` for a digest: any value, alike in every process."""
    return dumps(value, sort_keys=True)


def _message_text(message: BaseMessage) -> str:
    """What the provider reads of a message: role, name, content, tool calls, call id.

    With its extra fields and invalid tool calls: a legacy ``function_call`` and
    OpenAI-style ``tool_calls`` sit in ``additional_kwargs``, and the counter counts
    them (:func:`~langchain_context_pipeline.messages.countable.countable_parts`). A
    digest blind to them took a message whose call's arguments pruning had cut for
    the message the provider counted, and credited the cut at the counter's saving
    instead of the provider's: a request went out over its threshold. (Read only when
    either is there: a message without them keeps the digest it had before them.)
    """
    read = [
        message.type,
        getattr(message, "role", None),
        message.name,
        message.content,
        getattr(message, "tool_calls", None),
        getattr(message, "tool_call_id", None),
    ]
    invalid = getattr(message, "invalid_tool_calls", None)
    if invalid or message.additional_kwargs:
        read += [invalid, message.additional_kwargs]
    return stable_text(read)


def prefix_digests(seed: str, messages: Sequence[BaseMessage]) -> list[str]:
    """Return the digest of every prefix of a request: ``[i]`` covers its first ``i`` messages.

    ``[0]`` is the digest of the request's overhead alone (``seed``, from
    :func:`request_seed`); each next one chains the next message onto it.
    """
    return request_digests(seed, messages)[0]


def request_digests(seed: str, messages: Sequence[BaseMessage]) -> tuple[list[str], list[str]]:
    """Return a request's :func:`prefix_digests` and the digest of each message alone.

    A message's own digest does not depend on where it sits, so a run of messages
    the provider counted can be found again in a later request (:func:`span_digest`).
    """
    chain = hashlib.sha256(seed.encode())
    digests = [chain.hexdigest()[:16]]
    own: list[str] = []
    for message in messages:
        text = _message_text(message).encode("utf-8", "surrogatepass")
        chain.update(b"\x00" + text)
        digests.append(chain.hexdigest()[:16])
        own.append(hashlib.sha256(text).hexdigest()[:16])
    return digests, own


def span_digest(message_digests: Sequence[str]) -> str:
    """The digest of a run of messages, from their own digests (:func:`request_digests`)."""
    return hashlib.sha256("\x00".join(message_digests).encode()).hexdigest()[:16]


def _tool_schema(tool: Any) -> Any:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        return convert_to_openai_tool(tool)
    except Exception:  # provider built-ins and odd dicts: count what is there
        if isinstance(tool, Mapping):
            return dict(tool)
        return {"name": getattr(tool, "name", repr(tool)), "description": str(tool)}


def tools_tokens(counter: Counter, tools: Sequence[Any]) -> int:
    """Return what the tools' schemas (as the provider receives them) cost by ``counter``."""
    if not tools:
        return 0
    schemas = [_tool_schema(t) for t in tools]
    text = dumps(schemas, sort_keys=True)
    return int(counter([SystemMessage(text)]))


def request_overhead(
    counter: Counter, system_prompt: str | BaseMessage | None, tools: Sequence[Any]
) -> int:
    """Return the tokens a request spends beside its messages: system prompt and tools.

    The pre-model hook is given them (it cannot see them), so that what it records as
    sent is the whole request, as the provider's reported usage is.
    """
    tokens = tools_tokens(counter, tools)
    if system_prompt is not None:
        system = (
            system_prompt
            if isinstance(system_prompt, BaseMessage)
            else SystemMessage(system_prompt)
        )
        tokens += int(counter([system]))
    return tokens


def request_seed(system: str | BaseMessage | None, tools: Sequence[Any] = ()) -> str:
    """Return the digest of what a request sends beside its messages: system prompt, tools.

    A changed system prompt or tool schema changes every digest of
    :func:`prefix_digests`, so no counted prefix is trusted across it.
    """
    if isinstance(system, BaseMessage):
        system = stable_text([system.type, system.content])
    parts = stable_text([system, [_tool_schema(t) for t in tools]])
    return hashlib.sha256(parts.encode("utf-8", "surrogatepass")).hexdigest()[:16]
