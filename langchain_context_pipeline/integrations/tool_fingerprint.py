"""A cheap fingerprint of tools' schemas, to key what their schemas cost.

The fingerprint holds what the schema a provider receives is made of (see
``langchain_core.utils.function_calling.convert_to_openai_tool``): a tool's name,
description and arguments schema, a dict tool's whole content. So an edit in place
(a dynamic tool description, a JSON arguments schema changed) gives a new key,
while building the schema, the costly part, is left to a cache miss. Classes and
functions enter it by identity (with their docstring): the caller keeps the tools
alive beside the key, so those identities cannot be reused.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool

from langchain_context_pipeline.messages.values import dumps

__all__ = ["tools_fingerprint"]


def _content(value: Any) -> Hashable:
    """Return a key of ``value`` that changes with its content (JSON-like or any)."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, type) or not isinstance(value, Mapping | list | tuple):
        # A schema class or a function: by identity, with its docstring (its description).
        return ("object", id(value), getattr(value, "__doc__", None))
    return dumps(value, sort_keys=True)  # any value: mixed keys, cycles, depth


def tool_fingerprint(tool: Any) -> Hashable:
    """Return the fingerprint of one tool's schema (see the module docstring)."""
    if isinstance(tool, BaseTool):
        meta = tool.metadata
        # A custom tool's schema holds its metadata's type and format.
        custom = (_content(meta.get("type")), _content(meta.get("format"))) if meta else None
        return (
            "tool",
            type(tool),
            tool.name,
            tool.description,
            _content(tool.args_schema),
            custom,
        )
    return ("other", type(tool), _content(tool))


def tools_fingerprint(tools: Sequence[Any]) -> tuple[Hashable, ...]:
    """Return the fingerprint of a request's tools, in order."""
    return tuple(tool_fingerprint(t) for t in tools)
