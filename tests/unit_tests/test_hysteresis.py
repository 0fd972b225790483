"""Compaction with hysteresis: between compactions, each request only appends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import ContextPipeline, PipelineSettings, estimate_tokens
from langchain_context_pipeline.stages.hysteresis import Cuts, StandingCuts, replay_cuts

THRESHOLD = 6000


def agent_run(sizes: list[tuple[int, int]]) -> list[list[BaseMessage]]:
    """The growing histories of an agent run: one tool step per turn."""
    history: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("Fix the bug")]
    runs = []
    for i, (text, output) in enumerate(sizes):
        call = {"name": "bash", "args": {"command": f"step {i}"}, "id": f"c{i}"}
        history = [
            *history,
            AIMessage(f"thinking {i} " + "t" * text, tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"out {i} " + "o" * output, tool_call_id=f"c{i}", id=f"t{i}"),
        ]
        runs.append(history)
    return runs


def is_prefix(before: list[BaseMessage], after: list[BaseMessage]) -> bool:
    return len(before) <= len(after) and all(a == b for a, b in zip(before, after, strict=False))


@given(
    sizes=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=20, max_size=60),
    low_water=st.sampled_from([0.4, 0.5, 0.7]),
)
# Pruning everything older than the tail fits at 92% of the threshold: nothing is
# dropped, and the next compaction comes one step later.
@example(
    sizes=[
        *[(0, 0)] * 6,
        *[(0, 66), (0, 1719), (867, 1699), (102, 494), (163, 493), (2067, 493), (0, 1449)],
        *[(0, 0), (0, 0), (887, 157), (1186, 0), (0, 492), (0, 1165), (2, 1091)],
    ],
    low_water=0.4,
)
# A cut goes once pruning fits: what it dropped comes back, landing at the threshold.
@example(
    sizes=[
        *[(0, 0), (259, 494), (1267, 72), (1979, 62), (1991, 11), (2000, 151), (0, 3)],
        *[(193, 495), (3, 3000), (0, 0), (0, 0), (0, 0), (0, 1948), (2187, 0), (2, 0)],
        *[(2, 0), (2, 0), (251, 5), (71, 0), (0, 0), (0, 0)],
    ],
    low_water=0.5,
)
def test_requests_share_their_prefix_between_compactions_far_apart(
    sizes: list[tuple[int, int]], low_water: float
) -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500, low_water=low_water)
    distance = (1 - low_water) * THRESHOLD
    biggest_step = max(estimate_tokens([AIMessage("t" * a), AIMessage("o" * b)]) for a, b in sizes)
    previous: list[BaseMessage] | None = None
    grown_at_last: int | None = None
    landed = 0
    dropped: str | None = None
    for history in agent_run(sizes):
        result = pipeline.compress(history)
        out = result.messages
        assert estimate_tokens(out) <= THRESHOLD
        raw = estimate_tokens(history)
        if previous is not None and not is_prefix(previous, out):
            # A compaction point. The first one (entering compression) may come at
            # any time; after it, the history must have grown by the configured
            # distance, or by the room the last compaction left when pruning alone
            # made the request fit above the low-water mark (truncation is the last
            # resort: nothing that fits once pruned is dropped), less one step of the
            # run, the granularity of a cut.
            if grown_at_last is not None:
                room = min(distance, THRESHOLD - landed)
                assert raw - grown_at_last >= room - 2 * biggest_step - 100
            grown_at_last = raw
            landed = estimate_tokens(out)
            # A new cut lands at the mark (a cut that goes, once pruning fits, brings
            # back what it dropped and may land anywhere within the threshold).
            if result.report.cuts.dropped_through not in (None, dropped):
                assert landed <= low_water * THRESHOLD + biggest_step
        dropped = result.report.cuts.dropped_through
        previous = out


def test_low_water_is_checked() -> None:
    with pytest.raises(ValueError, match="low_water must be in"):
        PipelineSettings(low_water=0)
    with pytest.raises(ValueError, match="low_water must be in"):
        ContextPipeline(low_water=1.5)


def test_the_report_says_what_the_cache_saw() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    previous: list[BaseMessage] = []
    previous_tokens: int | None = None
    seen_compaction = False
    for history in agent_run([(300, 900)] * 30):
        result = pipeline.compress(history)
        report = result.report
        if previous_tokens is None:
            assert report.cached_prefix_tokens is None and report.cached_prefix_share is None
        else:
            assert report.cached_prefix_tokens is not None
            if is_prefix(previous, result.messages):
                assert report.cached_prefix_tokens == previous_tokens
            else:
                seen_compaction = True
                assert report.cached_prefix_tokens < previous_tokens
        previous, previous_tokens = result.messages, estimate_tokens(result.messages)
    assert seen_compaction


async def test_the_report_says_what_the_cache_saw_async() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    first, second = agent_run([(300, 900)] * 2)
    assert (await pipeline.acompress(first)).report.cached_prefix_tokens is None
    report = (await pipeline.acompress(second)).report
    assert report.cached_prefix_tokens == estimate_tokens(first)
    assert report.cached_prefix_share == estimate_tokens(first) / estimate_tokens(second)


def test_another_counter_is_asked_for_the_repeated_prefix() -> None:
    # A counter that adds framing per request: the cached prefix is its count of the
    # repeated messages as one request, not a sum of per-message counts.
    def framed(messages: Sequence[BaseMessage]) -> int:
        return estimate_tokens(list(messages)) + 7

    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500, token_counter=framed)
    first, second = agent_run([(300, 900)] * 2)
    pipeline.compress(first)
    report = pipeline.compress(second).report
    assert report.cached_prefix_tokens == framed(first)


def test_conversations_are_watched_apart() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    first, second = agent_run([(300, 900)] * 2)
    other = [SystemMessage("You are another agent."), HumanMessage("Write the docs")]
    pipeline.compress(first)
    assert pipeline.compress(other).report.cached_prefix_tokens is None
    assert pipeline.compress(second).report.cached_prefix_tokens == estimate_tokens(first)


def test_a_compaction_prunes_the_oldest_units_down_to_the_low_water_mark() -> None:
    # 600 tokens over a limit of 500: pruning two units (90 each) lands at 420, under
    # the low-water mark of 450; the two newer ones older than the tail stay verbatim
    # (what fits is not cut), and nothing is dropped.
    def landing_at(low_water: int) -> Cuts:
        return replay_cuts(
            [100] * 6,
            [10] * 6,
            [False] * 6,
            fixed=0,
            limit=500,
            low_water=low_water,
            tail_budget=200,
            note=lambda drop: 20,
        )

    assert landing_at(450) == Cuts(prune=2, drop=0)
    # At a lower low-water mark, every unit older than the tail is pruned (and only
    # then does truncation, the last resort, come in: here it need not).
    assert landing_at(250) == Cuts(prune=4, drop=0)


def test_truncation_reaches_the_low_water_mark_after_pruning_everything_it_may() -> None:
    # Pruned units still weigh 90 of 100: after pruning the four older than the tail
    # (560 tokens), truncation drops the oldest until the request is at the low-water
    # mark: three would leave 290, the removal note's 20 more make it a fourth.
    cuts = replay_cuts(
        [100] * 6,
        [90] * 6,
        [False] * 6,
        fixed=0,
        limit=500,
        low_water=300,
        tail_budget=200,
        note=lambda drop: 20,
    )
    assert cuts == Cuts(prune=4, drop=4)


def test_a_cut_made_when_pruning_could_not_fit_goes_once_pruning_does() -> None:
    # The third unit alone overflows: the two before it go. At the next prefix the
    # third unit is pruned too, the prefix fits without dropping anything, and
    # nothing is dropped (the cut used to stay where it was, for good).
    raw, pruned = [100, 100, 600, 100, 100], [10, 10, 10, 10, 10]
    common = {"fixed": 0, "limit": 500, "low_water": 300, "tail_budget": 200}
    assert replay_cuts(raw[:3], pruned[:3], [False] * 3, **common, note=lambda d: 5) == Cuts(2, 2)
    assert replay_cuts(raw, pruned, [False] * 5, **common, note=lambda d: 5) == Cuts(3, 0)


def test_a_cut_is_not_made_for_a_note_that_costs_what_it_replaces() -> None:
    # Dropping the two pruned units (20 tokens) for a note of 20 saves nothing.
    raw, pruned = [100, 100, 600], [10, 10, 10]
    common = {"fixed": 0, "limit": 500, "low_water": 300, "tail_budget": 200}
    assert replay_cuts(raw, pruned, [False] * 3, **common, note=lambda d: 20) == Cuts(2, 0)


# -- cuts that already stand (the hook and the middleware carry them) -------------------

unit_sizes = st.lists(st.tuples(st.integers(1, 400), st.integers(1, 60)), min_size=2, max_size=40)


@given(
    units=unit_sizes,
    grown=st.integers(0, 15),
    first_limit=st.integers(300, 3000),
    second_limit=st.integers(300, 3000),
    low_water=st.sampled_from([0.4, 0.5, 0.7, 1.0]),
)
def test_a_replay_from_standing_cuts_moves_them_only_forward(
    units: list[tuple[int, int]],
    grown: int,
    first_limit: int,
    second_limit: int,
    low_water: float,
) -> None:
    # The cuts of a request, replayed on the grown list at another limit (the budget
    # the provider's usage gave the next call): they never move back, and when the
    # grown list fits beside them they do not move at all (the cached prefix stays).
    raw = [r for r, _ in units]
    pruned = [min(p, r) for r, p in units]
    stays = [False] * len(units)
    before = max(1, len(units) - grown)

    def cuts(n: int, limit: int, start: Cuts | None = None) -> Cuts:
        return replay_cuts(
            raw[:n],
            pruned[:n],
            stays[:n],
            fixed=10,
            limit=limit,
            low_water=max(1, int(low_water * limit)),
            tail_budget=limit // 4,
            note=lambda drop: 5,
            start=start,
        )

    standing = cuts(before, first_limit)
    after = cuts(len(units), second_limit, standing)
    assert after.prune >= standing.prune and after.drop >= standing.drop
    kept = sum(pruned[i] if i < standing.prune else raw[i] for i in range(standing.drop, len(raw)))
    if 10 + kept + (5 if standing.drop else 0) <= second_limit:
        assert after == standing
    assert cuts(len(units), second_limit) == replay_cuts(
        raw,
        pruned,
        stays,
        fixed=10,
        limit=second_limit,
        low_water=max(1, int(low_water * second_limit)),
        tail_budget=second_limit // 4,
        note=lambda drop: 5,
    )


def test_pruning_that_fits_beside_a_standing_drop_drops_nothing_more() -> None:
    # Units 0-1 were dropped; unit 2 and 3 grew the list past the limit. Pruning
    # them brings it back under: truncation, the last resort, cuts no further.
    raw, pruned = [100, 100, 100, 100, 100, 100], [10] * 6
    common = {"fixed": 0, "limit": 400, "low_water": 200, "tail_budget": 150}
    standing = Cuts(prune=2, drop=2)
    cuts = replay_cuts(raw, pruned, [False] * 6, **common, note=lambda d: 5, start=standing)
    assert cuts.drop == 2 and cuts.prune > 2


def test_the_pipeline_starts_from_the_cuts_it_is_given() -> None:
    # At a budget that grew (as the provider's reported usage grows it), the same
    # history keeps the earlier request's cuts instead of replaying them anew.
    runs = agent_run([(300, 900)] * 30)
    small = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    first = small.compress(runs[20])
    assert first.report.cuts is not None and first.report.cuts.pruned_through is not None
    grown = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    fresh = grown.compress(runs[21], threshold=int(THRESHOLD * 1.3))
    held = grown.compress(runs[21], threshold=int(THRESHOLD * 1.3), standing_cuts=first.report.cuts)
    assert is_prefix(first.messages, held.messages)
    assert not is_prefix(first.messages, fresh.messages)
    assert estimate_tokens(held.messages) <= THRESHOLD * 1.3
    # Ids that are not in the list leave the replay to start from nothing.
    lost = StandingCuts("nowhere", None)
    assert grown.compress(
        runs[21], threshold=int(THRESHOLD * 1.3), standing_cuts=lost
    ).messages == (fresh.messages)


def test_standing_cuts_read_back_from_state() -> None:
    for cuts in (StandingCuts("a3", "t1"), StandingCuts("a3", "t1", 1200), StandingCuts()):
        assert StandingCuts.from_value(cuts.to_value()) == cuts
    # The form stored before the note's index size was carried still reads.
    assert StandingCuts.from_value(["a3", "t1"]) == StandingCuts("a3", "t1")
    assert StandingCuts.from_value(None) is None
    assert StandingCuts.from_value(["a3"]) is None
    assert StandingCuts.from_value([1, None]) is None
    assert StandingCuts.from_value(["a3", "t1", -1]) is None
    assert StandingCuts.from_value(["a3", "t1", "1200"]) is None
    assert StandingCuts.from_value(["a3", "t1", True]) is None


def test_a_standing_drop_keeps_its_note_when_the_budget_grows() -> None:
    # The note's index is sized by the budget; as reported usage grows the budget,
    # the next request would get a longer index, a different note, and a cache
    # break after the head though nothing more is dropped. The size is carried
    # with the cut, so the note stays the same message.
    runs = agent_run([(20, 120)] * 102)
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=1500)
    first = pipeline.compress(runs[100])
    cuts = first.report.cuts
    assert cuts is not None and cuts.dropped_through is not None
    assert cuts.note_index is not None and first.report.truncate is not None
    assert cuts.note_index == first.report.truncate.note_index
    note = next(m for m in first.messages if m.id and m.id.startswith("context-note-"))
    assert "entries omitted" in str(note.content)  # the index was cut to its room
    grown = 2 * THRESHOLD
    held = pipeline.compress(runs[101], threshold=grown, standing_cuts=cuts)
    assert is_prefix(first.messages, held.messages)
    assert held.report.cuts == cuts
    # Without the carried size, the grown budget rewrites the note.
    unsized = replace(cuts, note_index=None)
    moved = pipeline.compress(runs[101], threshold=grown, standing_cuts=unsized)
    assert (
        moved.report.cuts is not None and moved.report.cuts.dropped_through == cuts.dropped_through
    )
    assert not is_prefix(first.messages, moved.messages)
