"""The ``recall`` tool: the agent reads back what compaction replaced.

Every brief, cut, summary and removal note names its originals with a reference
(``ref=ab12cd34``, or ``ref=ab12cd34..ef567890`` for a span of turns; see
:mod:`langchain_context_pipeline.messages.references`). :func:`create_recall_tool` returns a
LangChain tool that takes such a reference and returns the original text, paged.

Where the originals come from:

- graph state, where the full history is kept (the hook's default ephemeral
  mode; the agent middleware): no copy is made;
- a LangGraph ``BaseStore`` where it is not (the hook's persist mode; an LCEL
  chain with :func:`archive_originals`), under the run's ``thread_id``.

A reference resolves only within its own conversation. A malformed, unknown or
other conversation's reference gets a short error text, never an exception.

    >>> tool = create_recall_tool()
    >>> tool.name
    'recall'

With ``create_react_agent``, add it to the tools:
``create_react_agent(model, [*tools, create_recall_tool()], pre_model_hook=hook)``;
``ContextPipelineMiddleware`` adds it to a ``create_agent`` agent by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

try:
    from langgraph.prebuilt import ToolRuntime
    from langgraph.store.base import BaseStore
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the recall tool needs LangGraph: pip install 'langchain-context-pipeline[langgraph]'"
    ) from exc

from langchain_context_pipeline.integrations.archive import (
    aarchive_originals,
    archive_originals,
    read_record,
    thread_of,
)
from langchain_context_pipeline.messages.references import (
    call_of,
    format_ref,
    parse_ref,
    render_original,
    render_span,
    resolve,
    stands_in,
)
from langchain_context_pipeline.messages.values import dumps
from langchain_context_pipeline.stages.briefs import shorten

__all__ = [
    "DEFAULT_PAGE_CHARS",
    "MAX_PAGE_CHARS",
    "RECALL_DESCRIPTION",
    "aarchive_originals",
    "archive_originals",
    "create_recall_tool",
]

logger = logging.getLogger("langchain_context_pipeline")

DEFAULT_PAGE_CHARS = 8000
"""Characters per page by default (about 2,000 tokens: well inside the tail budget)."""

MAX_PAGE_CHARS = 32000
"""The largest page the tool returns, whatever ``limit`` asks."""

_ARGS_SHOWN = 600
"""Characters of a call's arguments shown with a tool result."""

RECALL_DESCRIPTION = """\
Read back the original of something this conversation no longer shows in full.
To keep the context small, old tool results become one-line briefs, long tool \
arguments and long assistant texts are cut, and earlier turns are summarised or \
removed. Each such place names its original with a reference: `ref=ab12cd34` \
(one message) or `ref=ab12cd34..ef567890` (a span of earlier turns).
Call this tool with that reference, e.g. ref="ab12cd34", when you need the exact \
text (a line of a file, an error message, a command's output, what the user asked) \
instead of running a tool again or guessing. A tool result comes back with the \
call's name and arguments.
Long originals come in pages: `offset` is the character to start at (default 0), \
`limit` how many characters to return (default {page}, at most {most}). The last \
line of each answer says how many characters are left and the offset of the next \
page. References work only within this conversation."""


def _page(name: str, ref: str, header: str, body: str, offset: int, limit: int) -> str:
    total = len(body)
    if offset > total:
        return f"{name}: offset {offset} is past the end of {format_ref(ref)} ({total:,} chars)."
    chunk = body[offset : offset + limit]
    end = offset + len(chunk)
    left = total - end
    head = f"[{name} {format_ref(ref)}: {header}; chars {offset:,}-{end:,} of {total:,}]"
    if left:
        foot = f'[{left:,} chars left: {name}(ref="{ref}", offset={end}) for the next page]'
    else:
        foot = f"[end of {format_ref(ref)}]"
    return f"{head}\n{chunk}\n{foot}"


def _describe(message: BaseMessage, call: Mapping[str, Any] | None) -> str:
    what = message.type
    if call is not None:
        args = dumps(call.get("args"))
        what = f"tool result of {call.get('name')} {shorten(args, _ARGS_SHOWN)}"
    elif isinstance(message, ToolMessage):
        what = f"tool result of {message.name or 'a tool'}"
    elif isinstance(message, AIMessage):
        what = "assistant message"
    elif isinstance(message, HumanMessage):
        what = "user message"
    return what


def _state_messages(state: Any, key: str) -> Sequence[BaseMessage]:
    value = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    if isinstance(value, Sequence) and all(isinstance(m, BaseMessage) for m in value):
        return value
    return []


def create_recall_tool(
    *,
    store: BaseStore | None = None,
    messages_key: str = "messages",
    page_chars: int = DEFAULT_PAGE_CHARS,
    name: str = "recall",
) -> BaseTool:
    """Return the tool an agent calls to read back what compaction replaced.

    Args:
        store: where archived originals are read from when graph state does not
            hold them (default: the graph's own store, if it was compiled with one).
        messages_key: the state key of the full history.
        page_chars: the default page size in characters.
        name: the tool's name.

    Returns:
        A ``StructuredTool`` taking ``ref``, ``offset`` and ``limit``; it reads
        the graph state, config and store through LangGraph's ``ToolRuntime``.

    Raises:
        ValueError: for a page size outside 1..``MAX_PAGE_CHARS``, or a name that
            is not an identifier.
    """
    if not isinstance(page_chars, int) or not 1 <= page_chars <= MAX_PAGE_CHARS:
        raise ValueError(f"page_chars must be an int in 1..{MAX_PAGE_CHARS}, got {page_chars!r}")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")

    def recall(ref: str, runtime: ToolRuntime, offset: int = 0, limit: int = page_chars) -> str:
        """Read back an original by its reference."""
        parsed = parse_ref(ref) if isinstance(ref, str) else None
        if parsed is None:
            return (
                f"{name}: {ref!r} is not a reference; give the 8 hex digits after ref=, "
                'e.g. ref="ab12cd34" or ref="ab12cd34..ef567890".'
            )
        if not isinstance(offset, int) or offset < 0:
            return f"{name}: offset must be a whole number >= 0, got {offset!r}."
        if not isinstance(limit, int) or limit < 1:
            return f"{name}: limit must be a whole number >= 1, got {limit!r}."
        limit = min(limit, MAX_PAGE_CHARS)
        key = parsed[0] if parsed[1] is None else f"{parsed[0]}..{parsed[1]}"
        history = _state_messages(runtime.state, messages_key)
        found = resolve(key, history)
        call: Mapping[str, Any] | None = None
        if found is not None and len(found) == 1 and parsed[1] is None:
            call = call_of(found[0], history)
        if found is not None and any(stands_in(m) for m in found):
            # Persist mode: state holds the brief, the store the original.
            source = store if store is not None else runtime.store
            if source is not None and thread_of(runtime.config) is not None:
                found = None
        if found is None:
            source = store if store is not None else runtime.store
            if source is None:
                return f"{name}: no original for {format_ref(key)} in this conversation."
            thread = thread_of(runtime.config)
            if thread is None:
                return (
                    f"{name}: cannot read archived originals without a thread_id in the "
                    "run's config (config={'configurable': {'thread_id': ...}})."
                )
            try:
                record = read_record(source, thread, key)
            except Exception as exc:  # the store is down: say so, never raise
                logger.warning("recall could not read the store: %s", exc)
                return (
                    f"{name}: the archive could not be read ({type(exc).__name__}); "
                    f"{format_ref(key)} is not recallable right now."
                )
            if record is None:
                return f"{name}: no original for {format_ref(key)} in this conversation."
            found, call = record
        if parsed[1] is None and len(found) == 1:
            message = found[0]
            return _page(
                name, key, _describe(message, call), render_original(message), offset, limit
            )
        header = f"{len(found)} messages"
        return _page(name, key, header, render_span(found), offset, limit)

    return StructuredTool.from_function(
        recall,
        name=name,
        description=RECALL_DESCRIPTION.format(page=page_chars, most=MAX_PAGE_CHARS),
    )
