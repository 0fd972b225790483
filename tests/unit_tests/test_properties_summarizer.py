"""Property tests of what the summarizer is shown: every message type, every tool format.

The summarizer's transcript must carry each condensed tool call (its name and id)
and each result (its call and the start of its text), whether the turn came as
LangChain ``tool_calls``, OpenAI chat calls, Anthropic ``tool_use``/``tool_result``
blocks, Responses ``function_call``/``function_call_output`` blocks or v1 blocks;
and a message type of the user's own is rendered, never a reason to fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_context_pipeline import BudgetError, Condenser, ContextPipeline, estimate_tokens
from langchain_context_pipeline.tokens.counters import message_text
from tests.support.strategies_shapes import (
    Note,
    pipelines,
    summarizer_conversations,
    tool_calls_named,
    tool_results_texted,
)

PREFIX = 40
"""How much of each result's text the transcript must show (its start is always kept)."""


class Scripted:
    """A summarizer that records each prompt and answers a short summary."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def __call__(self, prompt: Sequence[BaseMessage]) -> str:
        self.prompts.append(list(prompt))
        return "The agent read files and ran commands."


@given(summarizer_conversations(), st.integers(0, 3), st.integers(0, 3_000))
def test_the_summarizer_is_shown_every_middle_tool_call_and_result_in_every_format(
    history: list[BaseMessage], head_count: int, tail_budget: int
) -> None:
    model = Scripted()
    condenser = Condenser(model, head_count=head_count, tail_budget=tail_budget)
    out, stats = condenser.condense(history)
    kept = {m.id for m in out}
    middle = [m for m in history if m.id not in kept]
    if not model.prompts:  # nothing worth condensing: nothing was replaced
        assert not middle
        return
    assert stats.summarizer_failures == 0, stats.failure
    (prompt,) = model.prompts
    transcript = message_text(prompt[-1])
    for message in middle:
        for cid, name in tool_calls_named(message):
            assert f'<tool_call id="{cid}" name="{name}">' in transcript, (cid, name)
        for cid, text in tool_results_texted(message):
            assert f'call="{cid}"' in transcript, cid
            assert escape(text[:PREFIX]) in transcript, (cid, text[:PREFIX])
        if isinstance(message, Note):
            start = escape(message_text(message)[:PREFIX])
            assert f'<message type="note">{start}' in transcript


@given(summarizer_conversations(), pipelines())
def test_a_custom_message_type_compresses_with_every_summarizer(
    history: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    try:
        result = pipeline.compress(history)
    except BudgetError:  # what must be kept does not fit: another property's matter
        return
    condensed = result.report.condense
    failure = (condensed.failure if condensed is not None else None) or ""
    assert "prompt" not in failure, failure
    tokens = estimate_tokens(result.messages)
    if estimate_tokens(history) > pipeline.threshold:
        assert tokens <= pipeline.threshold
    assert result.messages[-1].id == history[-1].id
