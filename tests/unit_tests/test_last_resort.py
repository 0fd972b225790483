"""Truncation is the last resort: what fits is kept, the task stays, the newest turn stays valid."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import BudgetError, ContextPipeline, estimate_tokens, hard_truncate
from langchain_context_pipeline.messages.blocks import call_ids as call_ids_of
from langchain_context_pipeline.messages.marks import pipeline_kind
from langchain_context_pipeline.messages.references import span_ref
from langchain_context_pipeline.messages.units import group_units, is_system
from langchain_context_pipeline.stages import digest as digest_module
from langchain_context_pipeline.stages import truncate as truncate_module
from langchain_context_pipeline.stages.hysteresis import StandingCuts
from langchain_context_pipeline.stages.note import NotePricer, note_room, removal_note
from langchain_context_pipeline.tokens.counters import resolve_token_counter
from langchain_context_pipeline.tokens.meter import Meter
from tests.support.fakes import EchoSummarizer
from tests.support.invariants import assert_pairs_kept
from tests.support.strategies_shapes import conversations


def read_then_ask() -> list[BaseMessage]:
    """The history of issue 19: a big read, then a long user message."""
    return [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix the failing test in parser.py", id="task"),
        AIMessage(
            "",
            tool_calls=[{"name": "read_file", "args": {"path": "src/parser.py"}, "id": "c1"}],
            id="a1",
        ),
        ToolMessage("def parse(x):\n    return x\n" * (45_210 // 28), tool_call_id="c1", id="r1"),
        HumanMessage("please " * (40_000 // 7), id="u2"),
    ]


def test_what_fits_after_pruning_is_not_dropped() -> None:
    # Pruning briefs the read and the request fits: nothing is dropped for a note
    # (it was, down to the low-water mark, before).
    messages = read_then_ask()
    pipeline = ContextPipeline(
        threshold=12_000, tail_budget=10_000, head_count=1, token_counter="approximate"
    )
    result = pipeline.compress(messages)
    assert result.report.stages == ["prune"]
    assert result.report.tokens_after <= 12_000
    assert [m.id for m in result.messages] == [m.id for m in messages]
    assert not any(pipeline_kind(m) == "note" for m in result.messages)


def test_a_note_never_replaces_what_costs_no_more_than_the_note() -> None:
    # Dropping "ok" (a few tokens) for a note of thirty saves nothing: the huge last
    # message is cut instead and the short one stays.
    messages: list[BaseMessage] = [
        SystemMessage("be brief", id="s"),
        HumanMessage("the task", id="t"),
        HumanMessage("ok", id="ok"),
        HumanMessage("zeta " * 5_000, id="last"),
    ]
    out = hard_truncate(messages, threshold=400)
    assert estimate_tokens(out) <= 400
    assert [m.id for m in out] == ["s", "t", "ok", "last"]


def parallel(tag: str, count: int, size: int) -> list[BaseMessage]:
    calls = [
        {"name": "bash", "args": {"command": f"ls {tag}{j}"}, "id": f"{tag}{j}"}
        for j in range(count)
    ]
    out: list[BaseMessage] = [AIMessage("", tool_calls=calls, id=f"a{tag}")]
    out += [ToolMessage("o" * size, tool_call_id=c["id"], id=f"r{c['id']}") for c in calls]
    return out


def test_a_tool_unit_in_the_head_goes_when_what_must_be_kept_does_not_fit() -> None:
    # head_count=3 puts a whole tool unit in the head; the newest unit of five
    # parallel calls leaves no room for it at 500 tokens. It was kept at any price
    # (BudgetError); now it goes, named by the note, and the task stays.
    messages = [
        HumanMessage("task: fix it", id="task"),
        *parallel("h", 1, 600),
        HumanMessage("go on", id="u"),
        *parallel("n", 5, 300),
    ]
    out = ContextPipeline(threshold=500, tail_budget=100, head_count=3).compress(messages).messages
    assert estimate_tokens(out) <= 500
    assert out[0] == messages[0]
    assert_pairs_kept(messages, out)
    assert "ah" not in {m.id for m in out} and "rh0" not in {m.id for m in out}
    note = next(m for m in out if pipeline_kind(m) == "note")
    assert span_ref(messages[1:4]) in str(note.content)  # the note names what it replaced
    assert [m.id for m in out[-6:]] == [m.id for m in messages[-6:]]


def test_a_tool_unit_in_the_head_stays_when_it_fits() -> None:
    messages = [
        HumanMessage("task: fix it", id="task"),
        *parallel("h", 1, 60),
        *[HumanMessage(f"q{i} " + "word " * 400, id=f"q{i}") for i in range(6)],
    ]
    out = hard_truncate(messages, threshold=1_200, head_count=3)
    assert estimate_tokens(out) <= 1_200
    assert [m.id for m in out[:3]] == ["task", "ah", "rh0"]
    assert pipeline_kind(out[3]) == "note"


THINKING = {"type": "thinking", "thinking": "Let me reason. " * 400, "signature": "sig" * 20}


def thinking_turn() -> list[BaseMessage]:
    command = "ls " * 200
    ai = AIMessage(
        content=[
            dict(THINKING),
            {"type": "text", "text": "I'll run it. " * 50},
            {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": command}},
        ],
        tool_calls=[{"name": "bash", "args": {"command": command}, "id": "c1"}],
        id="a",
    )
    history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("task " * 600, id="t")]
    history += [HumanMessage(f"q{i} " + "x" * 3_000, id=f"q{i}") for i in range(6)]
    return [*history, ai, ToolMessage("out " * 800, tool_call_id="c1", id="r")]


def test_the_newest_tool_turn_keeps_its_thinking_block_whole() -> None:
    # The block alone fits (1,965 tokens), not with the rest: everything else is cut,
    # the block stays first and byte-identical (a provider rejects the newest tool-use
    # turn without it). It was dropped before.
    messages = thinking_turn()
    result = ContextPipeline(threshold=2_300, tail_budget=200).compress(messages)
    assert result.report.tokens_after <= 2_300
    turn = next(m for m in result.messages if m.id == "a")
    assert isinstance(turn.content, list) and turn.content[0] == THINKING
    assert result.messages[-1].id == "r"


def test_a_thinking_block_that_cannot_fit_is_a_clear_error_or_the_minimal_request() -> None:
    messages = thinking_turn()
    pipeline = ContextPipeline(threshold=1_500, tail_budget=200)
    with pytest.raises(BudgetError, match="reasoning blocks whole"):
        pipeline.compress(messages)
    result = pipeline.compress(messages, over_budget="minimal")
    assert result.report.stages == ["minimal"]
    turn = next(m for m in result.messages if m.id == "a")
    assert isinstance(turn.content, list) and turn.content[0] == THINKING


def long_run(n: int) -> list[BaseMessage]:
    """An agent run of ``n`` messages: one tool step per two."""
    history: list[BaseMessage] = [SystemMessage("agent"), HumanMessage("the task", id="task")]
    for i in range(n // 2):
        call = {"name": "read_file", "args": {"path": f"src/m{i}.py"}, "id": f"c{i}"}
        history.append(AIMessage(f"step {i}", tool_calls=[call], id=f"a{i}"))
        history.append(ToolMessage("line\n" * 300, tool_call_id=f"c{i}", id=f"t{i}"))
    return history


def test_settling_the_cuts_reads_each_dropped_message_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The replay priced the removal note by building it (an index over every dropped
    # message) at each compaction step: quadratic in the history. Counted by the
    # index's reference work, not by time.
    calls = 0
    original = digest_module.message_ref

    def counting(message: Any) -> str:
        nonlocal calls
        calls += 1
        return original(message)

    monkeypatch.setattr(digest_module, "message_ref", counting)
    work = []
    for n in (1_000, 4_000):
        calls = 0
        result = ContextPipeline(threshold=8_000).compress(long_run(n))
        assert "truncate" in result.report.stages
        work.append(calls)
    assert work[1] <= 5 * work[0]  # linear: 4x the history, about 4x the work
    assert work[1] <= 4 * 4_000


@given(conversations(), st.integers(0, 4_000), st.lists(st.integers(0, 40), max_size=6))
def test_the_note_pricer_gives_the_built_notes_tokens(
    history: list[BaseMessage], limit: int, drops: list[int]
) -> None:
    # Exact for the default estimate (the index's references name each call's own
    # result: the generated call ids are unique per conversation or per turn).
    units = group_units(history)
    stays = [any(is_system(history[i]) for i in range(*u)) for u in units]
    meter = Meter(estimate_tokens)
    index_chars = note_room(limit, 0, meter)[0]
    pricer = NotePricer(history, units, stays, index_chars, meter)
    for drop in drops:  # growing and shrinking: the pricer reads on or starts over
        drop = min(drop, len(units))
        gone = [history[i] for j in range(drop) if not stays[j] for i in range(*units[j])]
        built = meter.one(removal_note(gone, index_chars, meter)) if gone else 0
        if len({c for m in gone for c in call_ids_of(m)}) == len(
            [c for m in gone for c in call_ids_of(m)]
        ):
            assert pricer(drop) == built
        else:
            pricer(drop)


def test_a_removal_note_dearer_than_it_was_priced_still_leaves_a_request_within_budget() -> None:
    # Found by the last-resort property: the note standing for six dropped messages
    # (one of them 109 lone surrogates, escaped in its index) cost one token more
    # than truncation had priced it, and lowering the budget by that one token left
    # the same note, eight times over: a BudgetError while a request of 175 tokens
    # fits. The budget step now doubles at each attempt.
    messages: list[BaseMessage] = [
        SystemMessage("src/app.py ref=ab12cd34..ef567890" * 3, id="sys"),
        HumanMessage("a", id="task"),
        AIMessage(
            "",
            id="m9",
            tool_calls=[
                {"name": "bash", "args": {"command": "a"}, "id": "c0", "type": "tool_call"},
                {"name": "bash", "args": {"command": "a"}, "id": "c1", "type": "tool_call"},
            ],
        ),
        ToolMessage("", id="m10", tool_call_id="c0"),
        ToolMessage("", id="m11", tool_call_id="c1"),
        HumanMessage("a", id="m12"),
        HumanMessage("\ud800" * 109, id="m13"),
        HumanMessage(("alpha 日本 alpha" * 57)[:791], id="m14"),
    ]
    pipeline = ContextPipeline(
        threshold=834, tail_budget=0, head_count=1, tool_output_limit=0, model=None
    )
    result = pipeline.compress(messages)
    assert estimate_tokens(result.messages) <= 834
    assert result.messages[0] is messages[0]
    assert "truncate" in result.report.stages


def test_the_removal_note_dearer_per_char_lands_at_the_first_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same case: the note is held to its price by the meter (its index cut
    # further), so the plan's first attempt fits, with no retry.
    attempts = Mock(wraps=truncate_module._select)
    monkeypatch.setattr(truncate_module, "_select", attempts)
    test_a_removal_note_dearer_than_it_was_priced_still_leaves_a_request_within_budget()
    assert attempts.call_count == 1


HOSTILE = ["\ud800", "\udfff", "\x00", "\x1b", "\u2028", "\\", '"']
HOSTILE += ["日", "本", "😀", "\u200d", "\ufe0f"]  # CJK, an emoji, its joiners
hostile_text = st.text(
    st.one_of(st.sampled_from(HOSTILE), st.characters()), min_size=1, max_size=300
)


@st.composite
def hostile_turns(draw: st.DrawFn) -> list[BaseMessage]:
    """User requests and tool calls whose text the index writes back escaped."""
    out: list[BaseMessage] = []
    for i in range(draw(st.integers(1, 8))):
        out.append(HumanMessage(draw(hostile_text), id=f"u{i}"))
        command = draw(hostile_text)
        call = {"name": "bash", "args": {"command": command}, "id": f"c{i}", "type": "tool_call"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(ToolMessage(draw(hostile_text), tool_call_id=f"c{i}", id=f"t{i}"))
    return out


@pytest.mark.parametrize("counter", [estimate_tokens, "approximate"])
@given(hostile_turns(), st.integers(100, 40_000))
def test_a_removal_note_never_costs_more_than_it_was_priced(
    counter: Any, dropped: list[BaseMessage], budget: int
) -> None:
    # Surrogates, NUL, control characters, CJK and emoji cost more tokens per char
    # than the price's stand-in: the index is cut by the meter until the note fits.
    meter = Meter(resolve_token_counter(counter))
    index_chars, price = note_room(budget, 0, meter)
    note = removal_note(dropped, index_chars, meter)
    assert meter.one(note) <= price
    unheld = removal_note(dropped, index_chars)
    if meter.one(unheld) <= price:  # a note within its price is the note it was
        assert note.content == unheld.content
    units = group_units(dropped)
    pricer = NotePricer(dropped, units, [False] * len(units), index_chars, meter)
    assert pricer(len(units)) == meter.one(note)


def reads(count: int, chars: int) -> list[BaseMessage]:
    """The task, then ``count`` reads of ``chars`` characters each, then a short request."""
    out: list[BaseMessage] = [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix it", id="t"),
    ]
    for i in range(count):
        call = {"name": "read_file", "args": {"path": f"src/m{i}.py"}, "id": f"c{i}"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(
            ToolMessage(f"# m{i}\n" + "x = 1\n" * (chars // 6), tool_call_id=f"c{i}", id=f"r{i}")
        )
    out.append(HumanMessage("go on", id="u"))
    return out


@pytest.mark.parametrize("with_summarizer", [False, True])
def test_only_the_oldest_units_are_pruned_down_to_the_low_water_mark(
    with_summarizer: bool,
) -> None:
    # Five reads of about 3,000 tokens over a 13,000 limit: pruning the three oldest
    # lands under the low-water mark (6,500), so the fourth read, older than the tail
    # too, stays verbatim and no summary is written, with a summarizer or without.
    # (With one, every unit older than the tail was pruned before.)
    messages = reads(5, 12_000)
    summarizer = EchoSummarizer(calls=[])
    pipeline = ContextPipeline(
        threshold=13_000,
        tail_budget=3_500,
        token_counter="approximate",
        model=summarizer if with_summarizer else None,
    )
    result = pipeline.compress(messages)
    assert result.report.stages == ["prune"]
    assert summarizer.calls == []
    out = {m.id: m for m in result.messages}
    assert [m.id for m in result.messages] == [m.id for m in messages]
    assert out["r0"].content != messages[3].content  # the oldest read is briefed
    assert out["r2"].content != messages[7].content
    assert out["r3"] is messages[9]  # the newest read older than the tail is not
    assert out["r4"] is messages[11]  # the tail's read is not
    assert result.report.tokens_after <= 0.5 * 13_000
    # The prune cut is carried to the next call (by the hook and the middleware).
    assert result.report.cuts == StandingCuts("r2")


def test_a_summary_stands_where_truncation_would_cut() -> None:
    # Forty exchanges pruning does not shrink: the summary takes the place of what
    # truncation would drop, and no drop cut is carried.
    messages = reads(1, 12_000)[:-1]
    for i in range(40):
        messages.append(HumanMessage(f"question {i}: " + "why " * 375, id=f"q{i}"))
        messages.append(AIMessage(f"answer {i}: " + "because " * 180, id=f"x{i}"))
    summarizer = EchoSummarizer(calls=[])
    pipeline = ContextPipeline(
        threshold=13_000, tail_budget=3_500, token_counter="approximate", model=summarizer
    )
    result = pipeline.compress(messages)
    assert result.report.stages == ["prune", "condense"]
    assert len(summarizer.calls) == 1
    assert result.report.cuts == StandingCuts()
    assert [m.id for m in result.messages[:2]] == [None, "t"]
    assert pipeline_kind(result.messages[2]) == "summary"
    assert result.messages[-1] is messages[-1]
    assert result.report.tokens_after <= 13_000
