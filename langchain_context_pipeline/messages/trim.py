"""Text surgery shared by the Pruner and hard truncation: cut strings, JSON and content.

Every cut leaves a visible marker and is a fixed point: cutting already-cut text
with the same limit returns it unchanged, so re-running the pipeline over its own
output gives the same bytes (and a provider's prompt cache keeps its prefix).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.messages.anatomy import read
from langchain_context_pipeline.messages.blocks import cut_call_arguments
from langchain_context_pipeline.messages.kinds import (
    RESULT_BLOCKS,
    RESULT_CONTENT,
    TEXT_KEYS,
    WRAPPED_RESULTS,
    block_kind,
    block_type,
)
from langchain_context_pipeline.messages.values import entries, key_text


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


MAX_DEPTH = 32
"""Containers nested deeper than this inside tool arguments are replaced by a marker."""


def _marker(text: str, limit: int) -> str:
    return cut_end(text, max(limit, 0))


def _trigger(limit: int) -> int:
    """The size over which a container is cut (well over ``limit``: see :func:`_cut`)."""
    return max(4 * limit, limit + 64)


def _flat_size(value: dict[Any, Any], limit: int) -> int | None:
    """Return the size :func:`_cut` gives a flat dict with nothing to cut, else None.

    The common tool call (string keys, and strings, ints, booleans or None within
    ``limit``) is sized in one loop; any other entry, or one that would be cut, sends
    the dict down the general path, which gives the same size when nothing is cut.
    """
    total = 2
    for key, item in value.items():
        if type(key) is not str or len(key) > max(limit, 1):
            return None
        kind = type(item)
        if kind is str:
            if len(item) > limit:
                return None
            total += len(item) + len(key) + 6
        elif item is None or kind is bool:
            total += len(key) + 9
        elif kind is int:
            digits = int(item.bit_length() * 0.30103) + 1
            if digits > max(limit, 20):
                return None
            total += digits + len(key) + 5
        else:
            return None
    return total


def _cut(value: Any, limit: int, depth: int, ref: str = "") -> tuple[Any, int]:
    """Return ``value`` cut to ``limit`` and its approximate JSON size in chars.

    A value with nothing to cut comes back as the very same object (a set, a
    dataclass, a datetime included); a container cut becomes a JSON dict or list.
    """
    if isinstance(value, str):
        out = cut_end(value, limit, ref)
        return out, len(out) + 2
    if type(value) is dict and depth < MAX_DEPTH:
        size = _flat_size(value, limit)
        if size is not None and size <= _trigger(limit):
            return value, size
    named = f" ref={ref}" if ref else ""  # a marker names the original too
    if isinstance(value, bool) or value is None:
        return value, 5
    if isinstance(value, int):
        # bit_length, not str(): huge ints refuse str() past 4,300 digits.
        digits = int(value.bit_length() * 0.30103) + 1
        if digits > max(limit, 20):
            out = _marker(f"…[{digits:,}-digit number{named}]", limit)
            return out, len(out) + 2
        return value, digits + 1
    if isinstance(value, float):
        return value, len(repr(value))
    found = entries(value)
    if found is None:  # bytes, a datetime, any other object: read as its text
        text = key_text(value)
        if len(text) <= limit:
            return value, len(text) + 2
        return _cut(text, limit, depth, ref)
    if depth >= MAX_DEPTH:
        out = _marker(f"…[value nested over {MAX_DEPTH} levels deep{named}]", limit)
        return out, len(out) + 2
    # A container is cut only when well over the limit, to a size well under that
    # trigger: the hysteresis makes the cut a fixed point.
    trigger = _trigger(limit)
    is_mapping, parts = found
    if is_mapping:
        entries_out: list[tuple[Any, Any, int]] = []
        taken: set[Any] = set()
        same = True
        for key, item in parts:
            # A key keeps one char at least: the "…" of a cut dict's marker survives.
            new_key = cut_end(key, max(limit, 1)) if isinstance(key, str) else key
            while new_key in taken:  # a cut key never merges two entries into one
                new_key = f"{new_key}#{len(taken)}"
            taken.add(new_key)
            new_item, size = _cut(item, limit, depth + 1, ref)
            same = same and new_key is key and new_item is item
            entries_out.append((new_key, new_item, size + len(key_text(new_key)) + 4))
        total = sum(size for _, _, size in entries_out) + 2
        if total <= trigger:
            return (value if same else {k: item for k, item, _ in entries_out}), total
        kept: dict[Any, Any] = {}
        used = 2
        for key, item, size in entries_out:
            if used + size > limit:
                break
            kept[key] = item
            used += size
        note = _marker(f"[+{len(entries_out) - len(kept):,} more keys{named}]", limit)
        kept["…"] = note
        return kept, used + len(note) + 7
    originals = list(parts)
    items = [_cut(item, limit, depth + 1, ref) for item in originals]
    total = sum(size + 1 for _, size in items) + 2
    if total <= trigger:
        if all(a is b for a, (b, _) in zip(originals, items, strict=True)):
            return value, total  # nothing to cut: the list, tuple or set itself
        return [item for item, _ in items], total
    out_items: list[Any] = []
    used = 2
    for item, size in items:
        if used + size + 1 > limit:
            break
        out_items.append(item)
        used += size + 1
    note = _marker(f"…[+{len(items) - len(out_items):,} more items{named}]", limit)
    out_items.append(note)
    return out_items, used + len(note) + 3


def cut_json(value: Any, limit: int, ref: str = "") -> Any:
    """Cut a JSON-like value so no part of it is oversized, with visible markers.

    Every string is cut to ``limit`` chars; a number longer than ``limit`` digits,
    a list or dict far larger than ``limit`` chars (its first entries within
    ``limit`` are kept, then a marker of how many went) and anything nested over
    :data:`MAX_DEPTH` levels deep are replaced by a marker. Cutting a cut value
    with the same limit returns it unchanged. With ``ref``, each cut string's
    marker names the original message.
    """
    return _cut(value, limit, 0, ref)[0]


def replace_text(message: BaseMessage, text: str) -> Any:
    """Return the message's content with its text replaced by ``text``.

    String content becomes ``text``; in block content the first text block (any
    text kind: ``text``, ``input_text``, ``output_text``, a custom tool's
    ``custom_tool_call_output``, a bare string) takes ``text`` (keeping its other
    keys: a Responses ``id`` and ``annotations``, Anthropic ``citations``), the other
    text blocks go, and non-text blocks (images, tool calls, reasoning) stay where
    they were.
    """
    content = message.content
    if isinstance(content, str):
        return text
    texts = read(message).text_positions
    out: list[Any] = []
    placed = False
    for position, block in enumerate(content):
        if position not in texts:
            out.append(block)
        elif not placed:
            key = TEXT_KEYS[block["type"]] if isinstance(block, dict) else ""
            out.append({**block, key: text} if isinstance(block, dict) else text)
            placed = True
    if not placed:
        out.insert(0, {"type": "text", "text": text})
    return out


def result_content(message: BaseMessage, text: str) -> Any:
    """Return the content of a tool result rewritten as ``text`` (a brief), in its form.

    ``text`` itself, unless the result must keep a block to be sent as what it is
    (:data:`~langchain_context_pipeline.messages.kinds.WRAPPED_RESULTS`: a custom
    tool's output): then that block alone, holding ``text``.
    """
    content = message.content
    if not isinstance(content, str):
        for block in content:
            kind = block_type(block)
            if kind in WRAPPED_RESULTS and isinstance(block, dict):
                return [{**block, TEXT_KEYS[kind]: text}]
    return text


def slim_blocks(content: list[Any], drop_reasoning: bool, ref: str = "") -> list[Any]:
    """Return block content with bulky blocks replaced by one-line markers.

    Text blocks and tool-call blocks stay (the text is cut by the caller, the
    arguments by :func:`with_cut_args`); a tool result keeps its id (and status) with a
    marker for its content, or stays whole when it has no text to cut; reasoning
    blocks stay whole, or go whole with ``drop_reasoning`` (see
    :mod:`~langchain_context_pipeline.messages.blocks` for what providers accept).
    With ``ref``, each marker names the original.
    """
    named = f" ref={ref}" if ref else ""
    out: list[Any] = []
    for block in content:
        kind = block_kind(block)
        if kind in ("text", "call"):
            out.append(block)
        elif kind == "reasoning":
            if not drop_reasoning:
                out.append(block)
        elif kind == "result" and isinstance(block, dict) and block["type"] not in RESULT_CONTENT:
            out.append(block)  # no text to cut (a verdict, a list of tools): as it is
        elif kind == "result" and isinstance(block, dict):
            name = block["type"]
            kept = ("type", RESULT_BLOCKS[name], "status")  # an apply_patch output needs its status
            slim = {k: v for k, v in block.items() if k in kept}
            out.append(
                {**slim, RESULT_CONTENT[name]: f"[result cut to fit the context window{named}]"}
            )
        else:
            label = block_type(block) or "block"
            out.append({"type": "text", "text": f"[{label} cut to fit the context window{named}]"})
    return out


ARGUMENTS_CUT = "…"
"""The one key of arguments replaced whole by :func:`without_args`."""


def without_args(message: AIMessage, ref: str = "") -> AIMessage:
    """Return a copy of ``message`` whose every call's arguments are one marker.

    The last resort of hard truncation, when even :func:`cut_json` at a small
    limit leaves the message over its share: each non-empty argument value (every
    copy a provider would send) becomes ``{"…": "[arguments cut ref=ab12cd34]"}`` (a
    free-form input, the marker's text).
    A fixed point: the marker is replaced by itself.
    """
    named = f" ref={ref}" if ref else ""
    text = f"[arguments cut to fit the context window{named}]"
    marker = {ARGUMENTS_CUT: text}
    # A free-form input (a custom tool's) is one string: it becomes the marker's text.
    return cut_call_arguments(
        message, lambda value: (text if isinstance(value, str) else marker) if value else value
    )


def with_cut_args(message: AIMessage, limit: int, ref: str = "") -> tuple[AIMessage, bool]:
    """Return a copy of ``message`` whose tool-call arguments are cut to ``limit`` chars.

    With ``ref``, each cut's marker names the original message. The same cut
    (:func:`cut_json`) reaches every copy of the arguments a provider would send (see
    :func:`~langchain_context_pipeline.messages.blocks.cut_call_arguments`). Returns the message
    itself and False when nothing is oversized.
    """
    out = cut_call_arguments(message, lambda value: cut_json(value, limit, ref))
    return out, out is not message
