"""Text surgery shared by the Pruner and hard truncation: cut strings, JSON and content.

Every cut leaves a visible marker and is a fixed point: cutting already-cut text
with the same limit returns it unchanged, so re-running the pipeline over its own
output gives the same bytes (and a provider's prompt cache keeps its prefix).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage


def cut_end(text: str, limit: int, ref: str = "") -> str:
    """Cut ``text`` to at most ``limit`` chars, ending with a marker of what was cut.

    With ``ref``, the marker names the original (``…[+N chars ref=ab12cd34]``).
    """
    if len(text) <= limit:
        return text
    named = f" ref={ref}" if ref else ""
    keep = limit - len(f"…[+{len(text)} chars{named}]")
    if keep <= 0:
        return text[: max(limit, 0)]
    return f"{text[:keep]}…[+{len(text) - keep} chars{named}]"


def cut_middle(text: str, keep_head: int, keep_tail: int, ref: str = "") -> str:
    """Keep the first ``keep_head`` and last ``keep_tail`` chars, with a marker between.

    With ``ref``, the marker names the original (``[… N chars trimmed ref=ab12cd34 …]``).
    """
    removed = len(text) - keep_head - keep_tail
    if removed <= 0:
        return text
    tail = text[len(text) - keep_tail :] if keep_tail > 0 else ""
    named = f" ref={ref}" if ref else ""
    return f"{text[:keep_head]}\n[… {removed:,} chars trimmed{named} …]\n{tail}"


def cut_json(value: Any, limit: int, ref: str = "") -> Any:
    """Cut every string inside a JSON-like value to ``limit`` chars, recursively."""
    if isinstance(value, str):
        return cut_end(value, limit, ref)
    if isinstance(value, dict):
        return {key: cut_json(item, limit, ref) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cut_json(item, limit, ref) for item in value]
    return value


def has_long_string(value: Any, limit: int) -> bool:
    """Return whether any string inside a JSON-like value is longer than ``limit``."""
    # A loop, not recursion: this runs on every old tool call at every turn.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > limit:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def replace_text(message: BaseMessage, text: str) -> Any:
    """Return the message's content with its text replaced by ``text``.

    String content becomes ``text``; in block content the first text block takes
    ``text``, the other text blocks go, and non-text blocks (images, tool calls,
    reasoning) stay where they were.
    """
    content = message.content
    if isinstance(content, str):
        return text
    out: list[Any] = []
    placed = False
    for block in content:
        is_text = isinstance(block, str) or (
            isinstance(block, dict) and block.get("type") == "text"
        )
        if not is_text:
            out.append(block)
        elif not placed:
            out.append({"type": "text", "text": text})
            placed = True
    if not placed:
        out.insert(0, {"type": "text", "text": text})
    return out


def with_cut_args(message: AIMessage, limit: int, ref: str = "") -> tuple[AIMessage, bool]:
    """Return a copy of ``message`` whose tool-call arguments are cut to ``limit`` chars.

    With ``ref``, each cut's marker names the original message.

    The same cut reaches every place the arguments live: ``tool_calls``,
    ``invalid_tool_calls`` (string arguments), ``tool_use`` blocks in the content and
    OpenAI-style ``additional_kwargs["tool_calls"]``, so no provider sees the old ones.
    """
    if not any(has_long_string(c["args"], limit) for c in message.tool_calls) and not any(
        has_long_string(c.get("args"), limit) for c in message.invalid_tool_calls
    ):
        return message, False
    new_calls = [{**c, "args": cut_json(c["args"], limit, ref)} for c in message.tool_calls]
    new_invalid = [
        {**c, "args": cut_end(str(c.get("args")), limit, ref)}
        if isinstance(c.get("args"), str)
        else c
        for c in message.invalid_tool_calls
    ]
    changed = new_calls != message.tool_calls or new_invalid != message.invalid_tool_calls
    if not changed:
        return message, False
    args_by_id = {c.get("id"): c["args"] for c in new_calls}
    update: dict[str, Any] = {"tool_calls": new_calls, "invalid_tool_calls": new_invalid}
    if not isinstance(message.content, str):
        blocks: list[Any] = []
        for block in message.content:
            if (
                isinstance(block, dict)
                and block.get("type") in ("tool_use", "tool_call")
                and block.get("id") in args_by_id
            ):
                key = "input" if "input" in block else "args"
                block = {**block, key: args_by_id[block.get("id")]}
            blocks.append(block)
        update["content"] = blocks
    raw_calls = message.additional_kwargs.get("tool_calls")
    if isinstance(raw_calls, list):
        raw_out: list[Any] = []
        for raw in raw_calls:
            fn = raw.get("function") if isinstance(raw, dict) else None
            if isinstance(fn, dict) and raw.get("id") in args_by_id:
                args_json = json.dumps(args_by_id[raw.get("id")], ensure_ascii=False)
                raw = {**raw, "function": {**fn, "arguments": args_json}}
            raw_out.append(raw)
        update["additional_kwargs"] = {**message.additional_kwargs, "tool_calls": raw_out}
    return message.model_copy(update=update), True
