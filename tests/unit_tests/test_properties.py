"""Property tests of the invariants, over generated conversations and configurations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_pipeline import DIGEST, BudgetError, ContextPipeline, estimate_tokens
from langchain_context_pipeline.messages.units import Split, is_system
from tests.support.invariants import (
    assert_last_kept,
    assert_pairs_kept,
    assert_systems_kept,
    snapshot,
)

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


def _summarizer(size: int, fail: bool) -> Callable[[Sequence[BaseMessage]], str]:
    def summarise(prompt: Sequence[BaseMessage]) -> str:
        if fail:
            raise RuntimeError("boom: provider error text that must not leak")
        return ("summary of the middle. " * (size // 23 + 1))[:size]

    return summarise


@st.composite
def pipelines(draw: st.DrawFn) -> ContextPipeline:
    threshold = draw(st.integers(1_000, 40_000))
    tail_budget = draw(st.integers(0, threshold - 1))
    text_limit = draw(st.integers(40, 4_000))
    keep_head = draw(st.integers(0, (text_limit - 40) // 2))
    keep_tail = draw(st.integers(0, text_limit - 40 - keep_head))
    model_kind = draw(st.sampled_from(["none", "digest", "model", "failing", "huge"]))
    model: Any = {
        "none": None,
        "digest": DIGEST,
        "model": _summarizer(draw(st.integers(1, 20_000)), fail=False),
        "failing": _summarizer(10, fail=True),
        "huge": _summarizer(900_000, fail=False),
    }[model_kind]
    return ContextPipeline(
        threshold=threshold,
        tail_budget=tail_budget,
        head_count=draw(st.integers(0, 4)),
        model=model,
        tool_output_limit=draw(st.integers(0, 1_000)),
        tool_args_limit=draw(st.integers(0, 400)),
        assistant_text_limit=text_limit,
        assistant_keep_head=keep_head,
        assistant_keep_tail=keep_tail,
        min_summary_tokens=draw(st.integers(1, 600)),
        max_summary_tokens=draw(st.integers(600, 5_000)),
    )


def _invoke(pipeline: ContextPipeline, messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """Run the pipeline; None when it rightly refuses (the system messages alone are over)."""
    try:
        return pipeline.invoke(messages)
    except BudgetError as error:
        systems = [m for m in messages if is_system(m)]
        assert estimate_tokens(systems) > pipeline.threshold, str(error)
        return None


@given(conversations(), pipelines())
def test_budget_holds(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = _invoke(pipeline, messages)
    if out is None:
        return
    if estimate_tokens(messages) <= pipeline.threshold:
        assert out is messages
    else:
        assert estimate_tokens(out) <= pipeline.threshold
    assert_last_kept(messages, out)


@given(conversations(), pipelines())
def test_tool_pairs_never_split(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = _invoke(pipeline, messages)
    if out is not None:
        assert_pairs_kept(messages, out)


@given(conversations(), pipelines())
def test_system_messages_kept(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = _invoke(pipeline, messages)
    if out is not None:
        assert_systems_kept(messages, out)


@given(conversations(), pipelines())
def test_input_never_mutated(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    before = snapshot(messages)
    _invoke(pipeline, messages)
    assert snapshot(messages) == before


@given(conversations(), pipelines())
def test_deterministic(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    """The same input gives the same output, whatever the instance's memos hold.

    The summary memory is off: remembering the first call's summary for a later
    call is its job (as the hook carries its summary), and a call that reuses it
    need not truncate as far as the call that wrote it (test_summary_memory.py
    covers that it reuses only the very same span).
    """
    pipeline.summary_memory = None
    first = _invoke(pipeline, messages)
    second = _invoke(pipeline, [m.model_copy() for m in messages])
    assert (first is None) == (second is None)
    if first is not None and second is not None:
        assert snapshot(first) == snapshot(second)


@given(conversations(), pipelines())
def test_idempotent(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    once = _invoke(pipeline, messages)
    if once is not None:
        assert pipeline.invoke(once) is once


@given(conversations(), pipelines())
def test_pruning_is_a_fixed_point(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    """Pruning pruned messages changes nothing, so a growing history keeps its prefix."""
    pruned, _ = pipeline.pruner.prune(messages, Split.of(messages, 0))
    again, stats = pipeline.pruner.prune(pruned, Split.of(pruned, 0))
    assert snapshot(again) == snapshot(pruned)
    assert (stats.briefed, stats.args_shortened, stats.texts_shortened) == (0, 0, 0)
