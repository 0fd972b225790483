"""What a provider tokenizes in a message: the one extraction every counter uses.

:func:`countable_parts` returns a message's texts (string content, text, reasoning,
thinking and redacted-thinking blocks, tool-use inputs and function-call arguments,
tool results, plain-text documents, JSON and unknown blocks, tool calls, invalid
tool calls and a legacy function call) and the fixed cost of its media (images,
binary files, audio, video), as the message's
:class:`~langchain_context_pipeline.messages.anatomy.Anatomy` holds them (read once per message).
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.messages.anatomy import (
    call_text,
    invalid_call_text,
    legacy_call,
    legacy_call_text,
    read,
)
from langchain_context_pipeline.messages.kinds import FILE_TOKENS, IMAGE_TOKENS
from langchain_context_pipeline.messages.values import dumps

__all__ = [
    "FILE_TOKENS",
    "IMAGE_TOKENS",
    "call_text",
    "content_parts",
    "countable_parts",
    "dumps",
    "invalid_call_text",
    "legacy_call",
    "legacy_call_text",
]


def content_parts(message: BaseMessage) -> tuple[list[str], int]:
    """Return the texts and fixed cost of a message's content alone (no tool calls)."""
    anatomy = read(message)
    return list(anatomy.content_texts), anatomy.fixed


def countable_parts(message: BaseMessage) -> tuple[list[str], int]:
    """Return what a provider tokenizes in ``message``: its texts and a fixed cost.

    Every counter of the package counts these same parts, so that each counts every
    kind of block: string content; text, reasoning, thinking and redacted-thinking
    blocks; tool-use inputs and function-call arguments (a call that is also in
    ``tool_calls`` once); tool-result blocks with their content; plain-text
    documents by their text; JSON and unknown blocks by their values; for an
    AIMessage, each tool call (name, JSON arguments, id) and each invalid tool call.

    Args:
        message: any message.

    Returns:
        ``(texts, fixed)``: the texts to tokenize, and the fixed tokens of media
        blocks (:data:`IMAGE_TOKENS` per image, :data:`FILE_TOKENS` per binary file,
        audio or video block). The per-message framing is not included.
    """
    return read(message).countable()
