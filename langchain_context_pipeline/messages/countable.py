"""What a provider tokenizes in a message: the one extraction every counter uses.

:func:`countable_parts` returns a message's texts (string content, text, reasoning,
thinking and redacted-thinking blocks, tool-use inputs and function-call arguments,
tool results, plain-text documents, JSON and unknown blocks, tool calls and invalid
tool calls) and the fixed cost of its media (images, binary files, audio, video).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.messages.blocks import CALL_BLOCKS, block_call_id, block_type
from langchain_context_pipeline.messages.values import dumps

__all__ = [
    "FILE_TOKENS",
    "IMAGE_TOKENS",
    "call_text",
    "content_parts",
    "countable_parts",
    "dumps",
    "invalid_call_text",
]

IMAGE_TOKENS = 1600
"""Tokens charged for one image block, whatever its size."""

FILE_TOKENS = 3000
"""Tokens charged for one binary file block (a PDF, audio, video) whose text is not
inline: about one PDF page as Anthropic counts it (its text plus the page's image).
A file of many pages costs more: the entry points' calibration from the provider's
reported usage corrects the difference; a file block that carries its text (a
plain-text document) is counted by that text instead."""

_IMAGE_BLOCK_TYPES = frozenset({"image", "image_url", "input_image"})
_MEDIA_BLOCK_TYPES = frozenset(
    {"file", "input_file", "document", "audio", "input_audio", "video", "media"}
)
_TEXT_BLOCK_TYPES = frozenset({"text", "input_text", "output_text", "text-plain"})
# Keys of a block that are bookkeeping, not sent to the model as text.
_SKIPPED_KEYS = frozenset({"type", "cache_control", "index", "citations", "extras"})
# Tool calls, tool results and reasoning blocks are known to `_blocks`: a call block
# that repeats a `tool_calls` entry is skipped (counted once, from `tool_calls`);
# results and reasoning (thinking text and signature, redacted data, encrypted
# content) are counted by every value they send.


def _listed_call_ids(message: BaseMessage) -> frozenset[str]:
    """Return the ids of the calls counted from ``tool_calls``/``invalid_tool_calls``."""
    if not isinstance(message, AIMessage):
        return frozenset()
    ids = [c.get("id") for c in message.tool_calls]
    ids += [c.get("id") for c in message.invalid_tool_calls]
    return frozenset(i for i in ids if isinstance(i, str) and i)


def _inline_document_text(block: dict[str, Any]) -> list[Any] | str | None:
    """Return the inline text of a file block (or its content blocks), if it has any."""
    text = block.get("text")
    if isinstance(text, str):
        return text
    source = block.get("source")
    if isinstance(source, dict):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return str(source["data"])
        if source.get("type") == "content" and isinstance(source.get("content"), list):
            return list(source["content"])
    return None


def _block_parts(block: Any, texts: list[str], skip_ids: frozenset[str]) -> int:
    """Append the texts of one content block to ``texts``; return its fixed cost."""
    if isinstance(block, str):
        texts.append(block)
        return 0
    if not isinstance(block, dict):
        texts.append(dumps(block))  # any value, any depth (a list nested in a result)
        return 0
    kind = block_type(block)
    if kind in _TEXT_BLOCK_TYPES and isinstance(block.get("text"), str):
        texts.append(block["text"])
        return 0
    if kind in _IMAGE_BLOCK_TYPES:
        return IMAGE_TOKENS
    if kind in CALL_BLOCKS and block_call_id(block) in skip_ids:
        return 0  # the same call is counted once, from `tool_calls`
    if kind in _MEDIA_BLOCK_TYPES:
        inline = _inline_document_text(block)
        if inline is None:
            return FILE_TOKENS
        if isinstance(inline, str):
            texts.append(inline)
            return 0
        return sum(_block_parts(inner, texts, skip_ids) for inner in inline)
    # Reasoning and thinking (their text and signature), redacted thinking (its
    # data), tool results (their content, string or blocks), tool-use inputs and
    # function-call arguments, JSON blocks, unknown kinds: every value is sent.
    fixed = 0
    for key, value in block.items():
        if key in _SKIPPED_KEYS or value is None:
            continue
        if isinstance(value, str):
            if value:
                texts.append(value)
        elif isinstance(value, list) and key in {"content", "summary"}:
            fixed += sum(_block_parts(inner, texts, skip_ids) for inner in value)
        else:
            texts.append(dumps(value))
    return fixed


def content_parts(message: BaseMessage) -> tuple[list[str], int]:
    """Return the texts and fixed cost of a message's content alone (no tool calls)."""
    content = message.content
    texts: list[str] = []
    fixed = 0
    if isinstance(content, str):
        if content:
            texts.append(content)
    else:
        skip = _listed_call_ids(message)
        for block in content:
            fixed += _block_parts(block, texts, skip)
    return texts, fixed


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
    texts, fixed = content_parts(message)
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        texts += [call_text(call) for call in message.tool_calls]
        texts += [invalid_call_text(bad) for bad in message.invalid_tool_calls]
    return texts, fixed


def call_text(call: Mapping[str, Any]) -> str:
    """Return the text a tool call is counted as: its name, JSON arguments and id."""
    return f"{call['name']} {dumps(call['args'])} {call.get('id') or ''}"


def invalid_call_text(bad: Mapping[str, Any]) -> str:
    """Return the text an invalid tool call is counted as: its name, raw arguments and id."""
    return f"{bad.get('name') or ''} {bad.get('args') or ''} {bad.get('id') or ''}"
