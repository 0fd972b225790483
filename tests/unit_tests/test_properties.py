"""Property tests of the invariants, over generated conversations and configurations."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_context_pipeline import DIGEST, ContextPipeline, estimate_tokens
from langchain_context_pipeline.messages.units import Split
from tests.support.generated import conversations, invoke_or_none, summarizer
from tests.support.invariants import (
    assert_last_kept,
    assert_pairs_kept,
    assert_systems_kept,
    snapshot,
)


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
        "model": summarizer(draw(st.integers(1, 20_000)), fail=False),
        "failing": summarizer(10, fail=True),
        "huge": summarizer(900_000, fail=False),
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


@given(conversations(), pipelines())
def test_budget_holds(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = invoke_or_none(pipeline, messages)
    if out is None:
        return
    if estimate_tokens(messages) <= pipeline.threshold:
        assert out is messages
    else:
        assert estimate_tokens(out) <= pipeline.threshold
    assert_last_kept(messages, out)


@given(conversations(), pipelines())
def test_tool_pairs_never_split(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = invoke_or_none(pipeline, messages)
    if out is not None:
        assert_pairs_kept(messages, out)


@given(conversations(), pipelines())
def test_system_messages_kept(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    out = invoke_or_none(pipeline, messages)
    if out is not None:
        assert_systems_kept(messages, out)


@given(conversations(), pipelines())
def test_input_never_mutated(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    before = snapshot(messages)
    invoke_or_none(pipeline, messages)
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
    first = invoke_or_none(pipeline, messages)
    second = invoke_or_none(pipeline, [m.model_copy() for m in messages])
    assert (first is None) == (second is None)
    if first is not None and second is not None:
        assert snapshot(first) == snapshot(second)


@given(conversations(), pipelines())
def test_idempotent(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    once = invoke_or_none(pipeline, messages)
    if once is not None:
        assert pipeline.invoke(once) is once


@given(conversations(), pipelines())
def test_pruning_is_a_fixed_point(messages: list[BaseMessage], pipeline: ContextPipeline) -> None:
    """Pruning pruned messages changes nothing, so a growing history keeps its prefix."""
    pruned, _ = pipeline.pruner.prune(messages, Split.of(messages, 0))
    again, stats = pipeline.pruner.prune(pruned, Split.of(pruned, 0))
    assert snapshot(again) == snapshot(pruned)
    assert (stats.briefed, stats.args_shortened, stats.texts_shortened) == (0, 0, 0)
