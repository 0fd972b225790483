"""The one table of content-block kinds: what a block's ``type`` says it is.

Every reader and writer of the package asks this table (through
:func:`block_kind` or the named sets below), so a block is the same kind
everywhere: an OpenAI Responses ``output_text`` block is text to the counter, to
:func:`~langchain_context_pipeline.tokens.counters.message_text`, to the Pruner's
cut and to hard truncation alike.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "BLOCK_KINDS",
    "CALL_BLOCKS",
    "FILE_TOKENS",
    "IMAGE_BLOCKS",
    "IMAGE_TOKENS",
    "MARKABLE_BLOCKS",
    "MEDIA_BLOCKS",
    "REASONING_BLOCKS",
    "RESULT_BLOCKS",
    "RESULT_CONTENT",
    "TEXT_BLOCKS",
    "TEXT_INPUT_CALLS",
    "TEXT_KEYS",
    "WRAPPED_RESULTS",
    "Kind",
    "block_kind",
    "block_type",
]

Kind = Literal["text", "plain", "image", "media", "call", "result", "reasoning"]
"""What a block is: prose text, a plain-text document, an image, other media, a
tool call, a tool result, model reasoning."""

CALL_BLOCKS: dict[str, tuple[str, str]] = {
    "tool_use": ("id", "input"),
    "tool_call": ("id", "args"),
    "function_call": ("call_id", "arguments"),
    "computer_call": ("call_id", "action"),
    "custom_tool_call": ("call_id", "input"),
    "apply_patch_call": ("call_id", "operation"),
    "tool_search_call": ("call_id", "arguments"),
    "mcp_approval_request": ("id", "arguments"),
}
"""Content blocks that carry a tool call: type -> (id key, arguments key). An OpenAI
Responses ``computer_call`` (computer use) is answered by a ``ToolMessage`` of its
``call_id`` (``additional_kwargs["type"] == "computer_call_output"``), as langchain-openai
sends it; a ``custom_tool_call`` (a free-form tool, langchain-openai's ``custom_tool``,
whose ``input`` is one string, also listed in ``tool_calls`` as ``{"__arg1": input}``)
by a ``ToolMessage`` holding a ``custom_tool_call_output`` block (see
:data:`WRAPPED_RESULTS`). The Responses items langchain-openai keeps only as content
blocks of an AIMessage (never in ``tool_calls``) and sends back as they are: an
``apply_patch_call`` (its ``operation``: the file and the diff), a client-run
``tool_search_call`` and an MCP ``mcp_approval_request``, answered by the result
blocks of :data:`RESULT_BLOCKS` in a later message's content."""

TEXT_INPUT_CALLS = frozenset({"custom_tool_call"})
"""Call blocks whose arguments are one free-form string (never read as JSON): read
as ``{"__arg1": input}``, as langchain-openai lists the call in ``tool_calls``, and
cut as text."""

RESULT_BLOCKS: dict[str, str] = {
    "tool_result": "tool_use_id",
    "function_call_output": "call_id",
    "apply_patch_call_output": "call_id",
    "tool_search_output": "call_id",
    "mcp_approval_response": "approval_request_id",
}
"""Content blocks that carry a tool result: type -> key of the call id they answer.
The Responses API refuses a request holding one whose call it cannot find before it,
so every stage keeps each with its call (they are paired as any result is)."""

RESULT_CONTENT: dict[str, str] = {
    "tool_result": "content",
    "function_call_output": "output",
    "apply_patch_call_output": "output",
}
"""Result blocks whose result is text (or content blocks): type -> key of the result.
Only these are briefed or cut; a result block not here (a ``tool_search_output``'s
list of tools, an ``mcp_approval_response``'s verdict) has no text to shorten, and is
kept as it is."""

REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
"""Content blocks of model reasoning, kept whole or dropped whole, never edited."""

TEXT_KEYS: dict[str, str] = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "custom_tool_call_output": "output",
}
"""Content blocks of text: type -> the key of the text. LangChain/Anthropic ``text``,
Responses ``input_text`` and ``output_text``; and a custom tool's
``custom_tool_call_output``, the form of a ``ToolMessage`` that answers a
``custom_tool_call``, whose ``output`` is the result's text."""

TEXT_BLOCKS = frozenset(TEXT_KEYS)
"""Content blocks of text (see :data:`TEXT_KEYS`): their text is the message's text."""

WRAPPED_RESULTS = frozenset({"custom_tool_call_output"})
"""Text blocks that give a tool result its form: langchain-openai sends a
``ToolMessage`` as a custom tool's output only when its content holds one (else as a
function's output, which does not answer a ``custom_tool_call``), so a result
rewritten (briefed, cut) keeps the block, with the new text in it."""

IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image", "image_generation_call"})
"""Content blocks of an image, charged :data:`IMAGE_TOKENS` each. A Responses
``image_generation_call`` (an image the model made, its base64 ``result`` kept in the
AIMessage's content) is one too: langchain-openai sends it back by its id alone (the
whole item only with ``store=False``), so its megabytes of base64 were never text the
model reads; counted as text, one generated image outweighed any window."""

MEDIA_BLOCKS = frozenset(
    {"file", "input_file", "document", "audio", "input_audio", "video", "media"}
)
"""Content blocks of other media: counted by their inline text, else :data:`FILE_TOKENS`."""

MARKABLE_BLOCKS = frozenset(
    {"text", "image", "document", "tool_result", "tool_use", "search_result"}
)
"""The blocks Anthropic accepts a ``cache_control`` breakpoint on."""

BLOCK_KINDS: dict[str, Kind] = {
    **dict.fromkeys(TEXT_BLOCKS, "text"),
    "text-plain": "plain",
    **dict.fromkeys(IMAGE_BLOCKS, "image"),
    **dict.fromkeys(MEDIA_BLOCKS, "media"),
    **dict.fromkeys(CALL_BLOCKS, "call"),
    **dict.fromkeys(RESULT_BLOCKS, "result"),
    **dict.fromkeys(REASONING_BLOCKS, "reasoning"),
}
"""Every known block ``type`` and its :data:`Kind`; a type not here is unknown."""

IMAGE_TOKENS = 1600
"""Tokens charged for one image block, whatever its size."""

FILE_TOKENS = 3000
"""Tokens charged for one binary file block (a PDF, audio, video) whose text is not
inline: about one PDF page as Anthropic counts it (its text plus the page's image).
A file of many pages costs more: the entry points' calibration from the provider's
reported usage corrects the difference; a file block that carries its text (a
plain-text document) is counted by that text instead."""


def block_type(block: Any) -> str | None:
    """Return a content block's ``type``, or None for a string or a non-dict."""
    if isinstance(block, dict):
        kind = block.get("type")
        return kind if isinstance(kind, str) else None
    return None


def block_kind(block: Any) -> Kind | None:
    """Return what ``block`` is: a bare string is text; an unknown block is None."""
    if isinstance(block, str):
        return "text"
    kind = block_type(block)
    return None if kind is None else BLOCK_KINDS.get(kind)
