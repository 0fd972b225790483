"""Compaction with hysteresis: where the prune boundary and the truncation cut stand.

A provider caches a request's prefix, message by message. A cut that moves a
little at every turn re-sends everything after it uncached; a cut that moves only
when the request would overflow, and then far enough to bring it down to the
low-water mark, leaves the next turns appending to an unchanged prefix. Pruning
costs nothing and loses no turn, so a compaction prunes first: the oldest units older
than the tail, down to the low-water mark (what then fits stays verbatim); truncation
is the last resort: only when pruning everything older than the tail leaves the
request over the limit does it drop the oldest turns, then down to the low-water
mark, and never a span that costs no more than the note replacing it.

The pipeline settles its cuts this way with or without a summarizer; with one, a
summary is written only when pruning cannot bring a request under the limit (a
summary written to reach the low-water mark would land near it, so every later
compaction would need another), and it takes the place of every unit older than
the prune boundary instead of the truncation.

The pipeline keeps nothing between calls that could change its output, so the cuts
are a function of the list alone: :func:`replay_cuts` replays the conversation's growth
unit by unit (every prefix of the list is an earlier state of the same
conversation) and moves a cut only at a prefix that would overflow the limit with
the cuts as they stand. Each call on the grown list replays the same history up to
the previous list's end, finds the same cuts, and moves them only if the new turns
overflow. The prune cut only moves forward; the truncation cut too, except that it
goes back to nothing when pruning alone brings a compaction under the limit, which
can happen only while the pruned history fits the limit (so the replay stays linear
in a long history; the note's price is read incrementally, see ``NotePricer``).

A limit that changes between calls (the hook and the middleware budget each call by
what the provider reported) would replay the same history to other cuts, moving the
cached prefix; so they carry the last request's cuts (:class:`StandingCuts`, in the
thread's state) and the replay starts from them (``start``), moving them only forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.messages.marks import is_pipeline_summary
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.stages.pruner import Pruner, sum_stats
from langchain_context_pipeline.stages.stats import PruneStats
from langchain_context_pipeline.stages.truncate import NotePricer, note_room
from langchain_context_pipeline.tokens.counted import CutIds, cut_ids_of
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["Compaction", "Cuts", "StandingCuts", "prune_at_cuts", "replay_cuts", "settle"]


@dataclass(frozen=True)
class Cuts:
    """Where the cuts stand after replaying a list's growth (indices into its units)."""

    prune: int
    """Units ``[0, prune)`` are pruned; the rest stay verbatim."""
    drop: int
    """Units ``[0, drop)`` are dropped by truncation, except those that must stay."""


@dataclass(frozen=True)
class StandingCuts:
    """Where a request's cuts stand, by message id: what the next request starts from.

    The hook and the middleware keep it in graph state beside the calibration, so
    that the next call moves the cuts only forward from where the last request had
    them (see ``start`` in :func:`replay_cuts`); ids that are no longer in the
    conversation (or messages without ids) leave the replay to start from nothing.
    """

    pruned_through: str | None = None
    """Id of the last message of the last pruned unit (``None``: nothing pruned)."""
    dropped_through: str | None = None
    """Id of the last message of the last dropped unit (``None``: nothing dropped)."""
    note_index: int | None = None
    """Characters of the removal note's index where the drop stands (``None``: no
    note): carried with the cut, so that the note stays the same message while the
    cut stands, whatever the next budgets are."""

    @classmethod
    def from_value(cls, value: object) -> StandingCuts | None:
        """Read cuts from their stored form (see :func:`cut_ids_of`); anything else is none."""
        ids = cut_ids_of(value)
        return None if ids is None else cls(*ids)

    def to_value(self) -> CutIds:
        """The stored form, kept in the calibration record."""
        return self.pruned_through, self.dropped_through, self.note_index

    def start(self, unit_ids: Sequence[str | None]) -> Cuts:
        """The cuts as unit indices, given each unit's last message id (0: not found)."""
        where = {uid: i + 1 for i, uid in enumerate(unit_ids) if uid is not None}
        prune = where.get(self.pruned_through, 0) if self.pruned_through else 0
        drop = where.get(self.dropped_through, 0) if self.dropped_through else 0
        return Cuts(max(prune, drop), drop)


def replay_cuts(
    raw: Sequence[int],
    pruned: Sequence[int],
    stays: Sequence[bool],
    *,
    fixed: int,
    limit: int,
    low_water: int,
    tail_budget: int,
    note: Callable[[int], int],
    start: Cuts | None = None,
) -> Cuts:
    """Replay the growth of a list of units and return where its cuts stand.

    Args:
        raw: each unit's tokens as it is.
        pruned: each unit's tokens once pruned.
        stays: units truncation never drops (system messages, earlier summaries).
        fixed: tokens before the first unit (the head, a carried summary).
        limit: a prefix over this many tokens, with the cuts as they stand, compacts.
        low_water: a compaction that pruning leaves above ``limit`` drops the oldest
            units (those that may go) until the prefix is down to this many tokens;
            one that pruning brings under ``limit`` drops nothing.
        tail_budget: the newest units within this many tokens are never pruned (the
            last unit never is).
        note: tokens of the note that stands where truncation dropped units
            ``[0, drop)`` (it lists what they were), given ``drop``.
        start: cuts that already stand (those of the conversation's previous
            request, carried in its state): the replay starts from them and only
            moves them forward, so a budget that changed since (the provider's
            reported usage moves it) cannot move the cuts of requests already sent,
            and with them every later request's cached prefix.

    Returns:
        The prune boundary and the truncation cut.

    Example:
        >>> replay_cuts([100] * 10, [10] * 10, [False] * 10, fixed=0, limit=500,
        ...             low_water=300, tail_budget=200, note=lambda drop: 20)
        Cuts(prune=7, drop=0)
    """
    floor = (
        Cuts(0, 0) if start is None else Cuts(min(start.prune, len(raw)), min(start.drop, len(raw)))
    )
    prune, drop = max(floor.prune, floor.drop), floor.drop
    tail = 0
    full = fixed  # the prefix's tokens with the prune cut as it stands, nothing dropped
    size = fixed  # the same with the drop cut too, the note aside
    noted = note(drop) if drop else 0  # the note's tokens, once something is dropped
    tail_tokens = 0
    for end in range(1, len(raw) + 1):
        newest = end - 1
        kept = pruned[newest] if newest < prune else raw[newest]
        full += kept
        if newest >= drop or stays[newest]:
            size += kept
        tail_tokens += raw[newest]
        while tail < newest and tail_tokens > tail_budget:
            tail_tokens -= raw[tail]
            tail += 1
        if size + noted <= limit:
            continue
        # Prune the oldest units older than the tail, down to the low-water mark (or
        # all of them): free, so a compaction prunes before it drops anything, and
        # only as far as the landing needs, so the request keeps what fits verbatim.
        while prune < tail and (full > limit or size + noted > low_water):
            full -= raw[prune] - pruned[prune]
            if prune >= drop:
                size -= raw[prune] - pruned[prune]
            prune += 1
        if full <= limit and not floor.drop:
            # Truncation is the last resort: what fits once pruned drops nothing.
            drop, size, noted = 0, full, 0
            continue
        if size + noted <= limit:
            continue  # pruning fits beside the cut that already stands
        # The note lists what it replaces, so its size follows the cut: move the cut
        # by the note's price so far, then price the note again, until both fit.
        while size + noted > low_water and drop < newest:
            while size + noted > low_water and drop < newest:
                if not stays[drop]:
                    size -= pruned[drop] if drop < prune else raw[drop]
                drop += 1
            noted = note(drop)
        if full - size <= noted and not floor.drop:
            # A note never replaces what costs no more than the note.
            drop, size, noted = 0, full, 0
        prune = max(prune, drop)
    return Cuts(prune, drop)


settle = replay_cuts
"""The former name of :func:`replay_cuts`."""


class Compaction(NamedTuple):
    """A list pruned where the hysteresis cuts stand (see :func:`prune_at_cuts`)."""

    messages: list[BaseMessage]
    """The list, pruned up to the prune boundary."""
    prune: PruneStats
    """What pruning changed."""
    where: Split
    """The split, its tail starting at the prune boundary."""
    first: int | None
    """The index truncation drops units before (``None``: no cut)."""
    cuts: StandingCuts
    """Where the cuts stand, by message id, for the next call."""
    note_index: int | None = None
    """The removal note's index size to truncate with (``None``: by the budget)."""


def prune_at_cuts(
    pruner: Pruner,
    messages: list[BaseMessage],
    where: Split,
    base: int,
    limit: int,
    low_water: int,
    tail: int,
    meter: Meter,
    standing: StandingCuts | None = None,
) -> Compaction:
    """Prune ``messages`` where the hysteresis cuts stand, and say where truncation cuts.

    The units are those from ``base`` on (after the head and a carried summary); the
    replay prices each as it is and as the one pruning of this pass leaves it
    (everything after the head), which is kept up to the boundary the replay settles
    on. ``standing``: the cuts of the conversation's previous request, which the replay
    starts from (it moves them only forward).
    """
    pruned, each = pruner.prune_each(messages, replace(where, tail_start=len(messages)))
    units = [u for u in where.units if u[0] >= base]
    if not units:
        nothing = replace(where, tail_start=len(messages))
        return Compaction(pruned, sum_stats(each), nothing, None, StandingCuts())
    ends = [messages[u[1] - 1].id for u in units]
    # Only a system message or an earlier summary (always a HumanMessage) stays.
    systems = where.systems
    stays = [
        any(
            i in systems
            or (isinstance(messages[i], HumanMessage) and is_pipeline_summary(messages[i]))
            for i in range(*u)
        )
        for u in units
    ]
    # Pruning copies the messages it changes: only those are counted again.
    counts = meter.counts(messages)
    pruned_counts = [
        c if new is old else meter.one(new)
        for new, old, c in zip(pruned, messages, counts, strict=True)
    ]
    start = None if standing is None else standing.start(ends)
    # A standing drop keeps the note it was made with (its index size), so that the
    # note, and the prefix after it, do not change with the budget.
    carried = standing.note_index if standing is not None and start and start.drop else None
    index_chars = note_room(limit, 0, meter, carried)[0]
    cuts = replay_cuts(
        meter.spans(messages, units, counts),
        meter.spans(pruned, units, pruned_counts),
        stays,
        fixed=meter.span(messages, 0, base),
        limit=limit,
        low_water=low_water,
        tail_budget=tail,
        # The note is priced without building it at every step (see ``NotePricer``),
        # with the index size its standing cut was made with, if one stands.
        note=NotePricer(pruned, units, stays, index_chars, meter),
        start=start,
    )
    tail_start = units[cuts.prune][0] if cuts.prune < len(units) else len(messages)
    return Compaction(
        pruned[:tail_start] + messages[tail_start:],
        sum_stats(each[:tail_start]),
        replace(where, tail_start=tail_start),
        units[cuts.drop][0] if cuts.drop else None,
        StandingCuts(
            ends[cuts.prune - 1] if cuts.prune else None,
            ends[cuts.drop - 1] if cuts.drop else None,
        ),
        index_chars if cuts.drop else None,
    )
