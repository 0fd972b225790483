"""The texts a provider tokenizes in one content block (see ``countable_parts``).

Read by :func:`~langchain_context_pipeline.messages.anatomy.read` once per message;
everything else asks the anatomy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_context_pipeline.messages.kinds import (
    CALL_BLOCKS,
    FILE_TOKENS,
    IMAGE_TOKENS,
    TEXT_KEYS,
    block_kind,
    block_type,
)
from langchain_context_pipeline.messages.values import dumps

__all__ = [
    "block_call_id",
    "block_parts",
    "call_text",
    "invalid_call_text",
    "legacy_call_text",
    "parsed_arguments",
    "result_text",
]


def block_call_id(block: dict[str, Any]) -> str:
    """Return the call id of a tool-call block ("" when it has none)."""
    id_key = CALL_BLOCKS[block["type"]][0]
    cid = block.get(id_key) or (block.get("id") if id_key != "id" else None)
    return cid if isinstance(cid, str) else ""


# Keys of a block that are bookkeeping, not sent to the model as text.
_SKIPPED_KEYS = frozenset({"type", "cache_control", "index", "citations", "extras"})


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


def block_parts(block: Any, texts: list[str], skip_ids: frozenset[str]) -> int:
    """Append the countable texts of one block to ``texts``; return its fixed cost.

    A call block that repeats a ``tool_calls`` entry (``skip_ids``) is counted by
    its keys other than the call's (those are counted once, from ``tool_calls``);
    results and reasoning (thinking text and signature, redacted data, encrypted
    content) are counted by every value they send.
    """
    if isinstance(block, str):
        texts.append(block)
        return 0
    if not isinstance(block, dict):
        texts.append(dumps(block))  # any value, any depth (a list nested in a result)
        return 0
    kind = block_kind(block)
    key = TEXT_KEYS[block["type"]] if kind == "text" else "text"  # "text-plain": its text
    if kind in ("text", "plain") and isinstance(block.get(key), str):
        texts.append(block[key])
        return 0
    if kind == "image":
        return IMAGE_TOKENS
    left_out = _SKIPPED_KEYS
    if kind == "call" and block_call_id(block) in skip_ids:
        # The same call is counted once, from `tool_calls` (its id, name and
        # arguments); the block's own keys (a Responses item ``id``, ``status``) are
        # sent beside them, and counted below.
        left_out = _SKIPPED_KEYS.union(CALL_BLOCKS[block["type"]], ("name",))
    if kind == "media":
        inline = _inline_document_text(block)
        if inline is None:
            return FILE_TOKENS
        if isinstance(inline, str):
            texts.append(inline)
            return 0
        return sum(block_parts(inner, texts, skip_ids) for inner in inline)
    # Reasoning and thinking (their text and signature), redacted thinking (its
    # data), tool results (their content, string or blocks), tool-use inputs and
    # function-call arguments, JSON blocks, unknown kinds: every value is sent.
    fixed = 0
    for key, value in block.items():
        if key in left_out or value is None:
            continue
        if isinstance(value, str):
            if value:
                texts.append(value)
        elif isinstance(value, list) and key in {"content", "summary"}:
            fixed += sum(block_parts(inner, texts, skip_ids) for inner in value)
        else:
            texts.append(dumps(value))
    return fixed


def call_text(call: Mapping[str, Any]) -> str:
    """Return the text a tool call is counted as: its name, JSON arguments and id."""
    return f"{call['name']} {dumps(call['args'])} {call.get('id') or ''}"


def invalid_call_text(bad: Mapping[str, Any]) -> str:
    """Return the text an invalid tool call is counted as: its name, raw arguments and id."""
    return f"{bad.get('name') or ''} {bad.get('args') or ''} {bad.get('id') or ''}"


def legacy_call_text(call: Mapping[str, Any]) -> str:
    """Return the text a legacy ``function_call`` is counted as: its name and raw arguments."""
    name, args = call.get("name"), call.get("arguments")
    args_text = args if isinstance(args, str) else "" if args is None else dumps(args)
    return f"{name if isinstance(name, str) else ''} {args_text}"


def parsed_arguments(args: Any) -> Any:
    """Read arguments given as a JSON string."""
    if not isinstance(args, str):
        return args
    try:
        return json.loads(args)
    except (ValueError, RecursionError):
        return {"arguments": args}


def result_text(value: Any) -> tuple[str, list[Any]]:
    """Return the text of a tool result's value and its other parts (see ``result_parts``)."""
    if value is None or isinstance(value, str):
        return value or "", []
    if not isinstance(value, list):
        return "", [value]
    texts: list[str] = []
    others: list[Any] = []
    for part in value:
        if isinstance(part, str):
            texts.append(part)
        elif block_type(part) == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            others.append(part)
    return "\n".join(texts), others
