"""One builder of agent conversations: a head, ``steps`` tool steps, an optional last message.

Each step ``i`` is an ``AIMessage`` (id ``a{i}``) whose text is ``text(i)`` and
which calls ``tool`` with ``args(i)`` (call id ``c{i}``), then the tool's
``ToolMessage`` (id ``t{i}``) carrying ``output(i)``. The test files that need
such a history call :func:`conversation` with their own texts, so each test
keeps the exact messages it had, while the shape lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


def _read_path(i: int) -> dict[str, Any]:
    return {"path": f"src/m{i}.py"}


def conversation(
    steps: int,
    *,
    text: Callable[[int], str],
    output: Callable[[int], str],
    head: Sequence[BaseMessage] = (),
    last: BaseMessage | None = None,
    tool: str = "read_file",
    args: Callable[[int], dict[str, Any]] = _read_path,
    start: int = 0,
    named_results: bool = False,
) -> list[BaseMessage]:
    """``head``, then the tool steps ``start`` to ``start + steps - 1``, then ``last``.

    Args:
        steps: How many tool steps (an AI call and its result each).
        text: The AI message's text of step ``i``.
        output: The tool result's text of step ``i``.
        head: The messages before the first step (system prompt, task), as given.
        last: A message after the last step, if any.
        tool: The name of the tool every step calls.
        args: The call's arguments of step ``i`` (default ``{"path": "src/m{i}.py"}``).
        start: The index of the first step (a continuation of an earlier history).
        named_results: Whether each ``ToolMessage`` carries the tool's name.
    """
    messages: list[BaseMessage] = list(head)
    for i in range(start, start + steps):
        call = {"name": tool, "args": args(i), "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage(text(i), tool_calls=[call], id=f"a{i}"))
        name = {"name": tool} if named_results else {}
        messages.append(ToolMessage(output(i), tool_call_id=f"c{i}", id=f"t{i}", **name))
    if last is not None:
        messages.append(last)
    return messages


# Filler that the estimate charges about as ceil(chars / 4) did.
PROSE = "The quick brown fox (No. 7) jumps over the lazy dog. " * 60
TOOL_TEXT = "lorem ipsum dolor sit amet " * 150


def unprunable_conversation(steps: int, start: int = 0) -> list[BaseMessage]:
    """A task (when ``start`` is 0), then ``steps`` tool steps whose texts pruning cannot shrink.

    The history the hook and the middleware tests share; ``start`` continues one.
    """
    head = [HumanMessage("Find the bug.", id="task")] if start == 0 else []
    return conversation(
        steps,
        head=head,
        start=start,
        text=lambda i: f"step {i} " + PROSE[:1900],
        output=lambda i: TOOL_TEXT[:3000],
    )
