"""Property tests of truncation as the last resort, at thresholds of a few hundred tokens.

Conversations whose head (``head_count`` 1-4) may hold a tool unit of parallel
calls, and whose newest tool turn may open with a thinking block: a request within
the budget is found whenever one exists; the newest turn's reasoning blocks reach
the provider whole and first; a removal note never replaces what costs no more.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_context_pipeline import BudgetError, CarriedSummary, ContextPipeline, estimate_tokens
from langchain_context_pipeline.messages.marks import pipeline_kind
from langchain_context_pipeline.messages.units import group_units
from tests.support.invariants import smallest_request_tokens
from tests.support.strategies_shapes import (
    broken_pairs,
    head_tool_conversations,
    reasoning_of,
    small_pipelines,
    tight_cases,
)

modes = st.sampled_from(["single", "loop"])


def _calls(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> Iterator[tuple[list[BaseMessage], list[BaseMessage]]]:
    """Yield (input, output) of each call, one over the whole list or one per unit end."""
    ends = [len(history)] if mode == "single" else [end for _, end in group_units(history)]
    carried: CarriedSummary | None = None
    for k in ends:
        messages = history[:k]
        try:
            result = pipeline.compress(messages, carried_summary=carried)
        except BudgetError as error:
            smallest = smallest_request_tokens(messages, pipeline.head_count)
            assert smallest > pipeline.threshold, (
                f"BudgetError though a request of {smallest} tokens fits: {error}"
            )
            continue
        carried = result.carried_summary
        yield messages, result.messages


@given(tight_cases(), modes)
def test_no_budget_error_when_a_request_within_the_budget_exists(
    case: tuple[list[BaseMessage], ContextPipeline], mode: str
) -> None:
    history, pipeline = case
    for messages, out in _calls(history, pipeline, mode):
        if estimate_tokens(messages) > pipeline.threshold:
            assert estimate_tokens(out) <= pipeline.threshold
        assert not broken_pairs(out), broken_pairs(out)
        assert out[-1].id == messages[-1].id, "the last message was dropped"
        assert out[0].id == messages[0].id, "the first message (system or task) was dropped"


@given(head_tool_conversations(), small_pipelines(), modes)
def test_the_newest_turns_reasoning_reaches_the_provider_whole_and_first(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    for messages, out in _calls(history, pipeline, mode):
        start = group_units(messages)[-1][0]
        by_id = {m.id: m for m in out}
        for message in messages[start:]:
            blocks = reasoning_of(message)
            if blocks:
                kept = by_id[message.id]
                assert isinstance(kept.content, list)
                assert kept.content[: len(blocks)] == message.content[: len(blocks)]  # type: ignore[index]


@given(head_tool_conversations(), small_pipelines(), modes)
def test_a_removal_note_never_replaces_what_costs_no_more_than_the_note(
    history: list[BaseMessage], pipeline: ContextPipeline, mode: str
) -> None:
    for messages, out in _calls(history, pipeline, mode):
        notes = [m for m in out if pipeline_kind(m) == "note"]
        if not notes:
            continue
        kept = {m.id for m in out}
        gone = [m for m in messages if m.id not in kept]
        assert estimate_tokens(gone) > estimate_tokens(notes), "a note replaced what cost less"
