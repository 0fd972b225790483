"""Property tests over the turn-by-turn loop, with state carried between calls.

Each example replays a generated agent run (``strategies_loop.runs``): at every
turn the history grows, earlier messages may be edited in place, and the
pipeline is called with the summary the previous turn carried, as the LangGraph
hook and the middleware call it. At every turn:

- system messages (and ``ChatMessage`` with role system or developer) are all
  still there (DESIGN invariant 3);
- the output is within budget, and no tool unit is split (invariants 1 and 2);
- the caller's messages are not mutated;
- no forged mark is trusted: no tool result is taken as a summary (invariant 6);
- the long-lived pipeline's output equals a fresh instance's, given the same
  carried summary (invariant 4: memos and breakers change nothing). The summary
  memory is off for this comparison: remembering a summary for a later call is
  its job (it stands in for the carried summary an LCEL caller cannot pass), so
  it is the one memory that may change the output, and only by reusing a summary
  of the very same span.

Under ``HYPOTHESIS_PROFILE=ci`` each property replays 800 runs of two to eight
turns (``LOOP_EXAMPLES`` overrides it, e.g. for a longer hunt).
"""

from __future__ import annotations

import os
from copy import deepcopy
from dataclasses import replace

from hypothesis import given, settings
from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage

from langchain_context_pipeline import CarriedSummary, estimate_tokens, is_pipeline_summary
from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.messages.marks import pipeline_kind
from langchain_context_pipeline.messages.units import group_units, is_system
from langchain_context_pipeline.tokens.counters import message_text
from tests.support.invariants import assert_pairs_kept, smallest_request_tokens, snapshot
from tests.support.strategies_loop import Run, last_resort_runs, runs
from tests.support.strategies_shapes import broken_pairs, reasoning_of

LOOP_EXAMPLES = int(
    os.environ.get("LOOP_EXAMPLES", 800 if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else 40)
)
"""Runs per property (each of two to eight turns, so about 4,000 calls in CI: the
four properties at 2,000 runs took 40 of CI's 90 minutes on a 2-core machine)."""


def replay(run: Run, *, fresh: bool) -> list[tuple[list[BaseMessage], CompressionResult]]:
    """Replay ``run``; return each turn's history (a copy) and result.

    With ``fresh``, every turn also checks the long-lived pipeline's output
    against a new instance's given the same carried summary. The history and
    output are recorded as deep copies taken at the call: a later turn's edit in
    place changes the very message objects an earlier output holds, and each
    turn is judged on what it was given and what it returned.
    """
    pipeline = run.pipeline(summary_memory=not fresh)
    history: list[BaseMessage] = list(run.head)
    carried: CarriedSummary | None = None
    out: list[tuple[list[BaseMessage], CompressionResult]] = []
    for turn in run.turns:
        for edit in turn.edits:
            edit(history)
        history = [*history, *turn.messages]  # a new list: an output may be the old one
        before = snapshot(history)
        # As the middleware and the hook call it: when what must be kept cannot fit,
        # the smallest valid request, said in the report, not an exception.
        result = pipeline.compress(history, carried_summary=carried, over_budget="minimal")
        assert snapshot(history) == before, "the caller's messages were mutated"
        if fresh:
            again = run.pipeline(summary_memory=False).compress(
                history, carried_summary=carried, over_budget="minimal"
            )
            assert snapshot(result.messages) == snapshot(again.messages), (
                "the output differs from a fresh pipeline's"
            )
        out.append((deepcopy(history), replace(result, messages=deepcopy(result.messages))))
        carried = result.carried_summary
    return out


def check_systems(history: list[BaseMessage], output: list[BaseMessage]) -> None:
    kept = {m.id: m for m in output if is_system(m)}
    for message in history:
        if not is_system(message):
            continue
        assert message.id in kept, f"system message {message.id} was dropped"
        now = kept[message.id]
        assert type(now) is type(message)
        if isinstance(message, ChatMessage):
            assert isinstance(now, ChatMessage) and now.role == message.role
        text = message_text(now)
        assert text == message_text(message) or "trimmed" in text, "a system message was rewritten"
    assert sum(isinstance(m, SystemMessage | ChatMessage) for m in output) >= len(kept)


@settings(max_examples=LOOP_EXAMPLES)
@given(runs())
def test_loop_keeps_systems_pairs_and_trusts_no_forgery(run: Run) -> None:
    check_loop(run, budget=False)


@settings(max_examples=LOOP_EXAMPLES)
@given(runs())
def test_loop_stays_within_budget(run: Run) -> None:
    check_loop(run, budget=True)


def check_loop(run: Run, *, budget: bool) -> None:
    """Replay ``run`` and check every turn (the budget only with ``budget``)."""
    threshold = run.settings["threshold"]
    for history, result in replay(run, fresh=False):
        output = result.messages
        check_systems(history, output)
        assert_pairs_kept(history, output)
        assert not set(broken_pairs(output)) - set(broken_pairs(history)), "a pair was split"
        over = estimate_tokens(history) > threshold or result.report.summary_reused
        if budget and result.report.over_budget:
            # Only the smallest request may be over: the system messages, one
            # note and the newest unit, nothing more that could have gone.
            assert result.report.stages == ["minimal"]
            rest = [m.id for m in output if not is_system(m) and pipeline_kind(m) != "note"]
            newest = [m.id for m in history if not is_system(m)]
            assert not rest or rest == newest[-len(rest) :]
        elif budget and over:
            assert estimate_tokens(output) <= threshold
        assert output and output[-1].id == history[-1].id, "the last message was dropped"
        for message in output:
            if is_pipeline_summary(message):
                assert message.id is not None and message.id.startswith("context-summary-")
        carried = result.carried_summary
        assert carried is None or carried.message.id.startswith("context-summary-")  # type: ignore[union-attr]


@settings(max_examples=LOOP_EXAMPLES)
@given(runs())
def test_loop_output_equals_a_fresh_pipelines(run: Run) -> None:
    """Memos, breakers and edits in place between calls change nothing (invariant 4)."""
    replay(run, fresh=True)


@settings(max_examples=LOOP_EXAMPLES)
@given(runs())
def test_loop_step_run_again_with_its_state_pays_nothing_and_sends_the_same(run: Run) -> None:
    """A step run again with the state it had (a retried model call, a replay from a
    checkpoint) sends the same request, and buys no summary the first run bought.

    Checked at every turn whose pass bought no summary, or bought one from the
    model and sent it: a reply the condenser refused (the digest stands in, and is
    not remembered) is asked for again.
    """
    pipeline = run.pipeline()
    history: list[BaseMessage] = list(run.head)
    carried: CarriedSummary | None = None
    for turn in run.turns:
        for edit in turn.edits:
            edit(history)
        history = [*history, *turn.messages]
        result = pipeline.compress(history, carried_summary=carried, over_budget="minimal")
        condense = result.report.condense
        if condense is None or (
            condense.source == "model" and any(is_pipeline_summary(m) for m in result.messages)
        ):
            again = pipeline.compress(list(history), carried_summary=carried, over_budget="minimal")
            assert again.report.summarizer_calls == 0, "the step ran again bought a summary"
            assert snapshot(again.messages) == snapshot(result.messages)
        carried = result.carried_summary


@settings(max_examples=LOOP_EXAMPLES)
@given(last_resort_runs())
def test_loop_sends_the_smallest_request_only_when_nothing_smaller_fits(run: Run) -> None:
    """A tool unit in the head, a few hundred tokens, thinking on the newest turn: the
    budget holds, and the smallest request (over the budget) is sent only when the
    system messages, the task and the newest unit at their minimum do not fit."""
    check_loop(run, budget=True)
    threshold, head_count = run.settings["threshold"], run.settings["head_count"]
    for history, result in replay(run, fresh=False):
        if result.report.stages == ["minimal"]:
            assert smallest_request_tokens(history, head_count) > threshold
        by_id = {m.id: m for m in result.messages}
        for message in history[group_units(history)[-1][0] :]:
            blocks = reasoning_of(message)
            if blocks:  # the newest turn's reasoning, whole and first
                assert by_id[message.id].content[: len(blocks)] == message.content[: len(blocks)]
