"""Generated conversations for the property tests, and a pipeline run that may rightly refuse.

``conversations()`` draws histories of every role, text and block contents of
any size, tool calls with nested arguments, unanswered calls and orphan results;
``invoke_or_none`` runs a pipeline and returns ``None`` when it refuses because
the system messages alone are over the threshold (and checks that they are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_pipeline import BudgetError, ContextPipeline, estimate_tokens
from langchain_context_pipeline.messages.units import is_system

WORDS = ["alpha", "beta", "src/app.py", "npm test", "FAILED", "ok", "{", "}", "é", "日本", "\n"]

sizes = st.one_of(
    st.integers(0, 60),
    st.integers(60, 3_000),
    st.integers(3_000, 40_000),
    st.integers(40_000, 200_000),
)


@st.composite
def texts(draw: st.DrawFn, size: st.SearchStrategy[int] = sizes) -> str:
    n = draw(size)
    seed = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))
    return (seed * (n // max(len(seed), 1) + 1))[:n]


@st.composite
def contents(draw: st.DrawFn, size: st.SearchStrategy[int] = sizes) -> Any:
    text = draw(texts(size))
    shape = draw(st.sampled_from(["str", "str", "blocks", "image"]))
    if shape == "str":
        return text
    blocks: list[Any] = [{"type": "text", "text": text}]
    if shape == "image":
        blocks.append({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    return blocks


@st.composite
def call_args(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(
        st.lists(
            st.sampled_from(["path", "command", "query", "content", "old_str", "n"]),
            max_size=4,
            unique=True,
        )
    )
    args: dict[str, Any] = {}
    for key in keys:
        if key == "n":
            args[key] = draw(st.integers(0, 9))
        elif draw(st.booleans()):
            args[key] = draw(texts(st.integers(0, 5_000)))
        else:
            args[key] = {"nested": [draw(texts(st.integers(0, 2_000)))]}
    return args


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    counter = iter(range(10_000))
    with_ids = draw(st.booleans())

    def mid() -> str | None:
        return f"m{next(counter)}" if with_ids else None

    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(texts(st.integers(1, 3_000))), id=mid()))
    out.append(HumanMessage(draw(texts(st.integers(1, 5_000))), id=mid()))
    turns = draw(st.integers(0, 24))
    for _ in range(turns):
        kind = draw(st.sampled_from(["human", "ai", "tools", "tools", "tools", "system", "orphan"]))
        if kind == "human":
            out.append(HumanMessage(draw(contents()), id=mid()))
        elif kind == "ai":
            out.append(AIMessage(draw(contents()), id=mid()))
        elif kind == "system":
            out.append(SystemMessage(draw(texts(st.integers(1, 2_000))), id=mid()))
        elif kind == "orphan" and draw(st.integers(0, 3)) == 0:
            out.append(ToolMessage(draw(texts()), tool_call_id=f"lost{next(counter)}", id=mid()))
        else:
            n_calls = draw(st.integers(1, 3))
            calls = [
                {
                    "name": draw(
                        st.sampled_from(["read_file", "bash", "search", "browser_go", "x"])
                    ),
                    "args": draw(call_args()),
                    "id": f"call{next(counter)}",
                    "type": "tool_call",
                }
                for _ in range(n_calls)
            ]
            text = draw(contents(st.integers(0, 4_000)))
            out.append(AIMessage(text, tool_calls=calls, id=mid()))
            answered = calls if draw(st.integers(0, 9)) else calls[:-1]
            for call in answered:
                out.append(
                    ToolMessage(
                        draw(contents()), tool_call_id=call["id"], name=call["name"], id=mid()
                    )
                )
    return out


def summarizer(size: int, fail: bool) -> Callable[[Sequence[BaseMessage]], str]:
    """A summarizer callable: a summary of ``size`` characters, or a provider error."""

    def summarise(prompt: Sequence[BaseMessage]) -> str:
        if fail:
            raise RuntimeError("boom: provider error text that must not leak")
        return ("summary of the middle. " * (size // 23 + 1))[:size]

    return summarise


def invoke_or_none(
    pipeline: ContextPipeline, messages: list[BaseMessage]
) -> list[BaseMessage] | None:
    """Run the pipeline; None when it rightly refuses (the system messages alone are over)."""
    try:
        return pipeline.invoke(messages)
    except BudgetError as error:
        systems = [m for m in messages if is_system(m)]
        assert estimate_tokens(systems) > pipeline.threshold, str(error)
        return None
