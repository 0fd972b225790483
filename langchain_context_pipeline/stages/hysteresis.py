"""Compaction with hysteresis: where the prune boundary and the truncation cut stand.

A provider caches a request's prefix, message by message. A cut that moves a
little at every turn re-sends everything after it uncached; a cut that moves only
when the request would overflow, and then far enough to bring it down to the
low-water mark, leaves the next turns appending to an unchanged prefix. Pruning
costs nothing and loses no turn, so a compaction prunes everything older than the
tail; truncation is the last resort: only when pruning leaves the request over the
limit does it drop the oldest turns, then down to the low-water mark, and never a
span that costs no more than the note replacing it.

The pipeline settles its cuts this way when it has no summarizer; with one, a
summary is written only when pruning cannot bring a request under the limit (a
summary written to reach the low-water mark would land near it, so every later
compaction would need another).

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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Cuts", "replay_cuts", "settle"]


@dataclass(frozen=True)
class Cuts:
    """Where the cuts stand after replaying a list's growth (indices into its units)."""

    prune: int
    """Units ``[0, prune)`` are pruned; the rest stay verbatim."""
    drop: int
    """Units ``[0, drop)`` are dropped by truncation, except those that must stay."""


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

    Returns:
        The prune boundary and the truncation cut.

    Example:
        >>> replay_cuts([100] * 10, [10] * 10, [False] * 10, fixed=0, limit=500,
        ...             low_water=300, tail_budget=200, note=lambda drop: 20)
        Cuts(prune=7, drop=0)
    """
    prune = drop = tail = 0
    full = fixed  # the prefix's tokens with the prune cut as it stands, nothing dropped
    size = fixed  # the same with the drop cut too, the note aside
    noted = 0  # the note's tokens, once something is dropped
    tail_tokens = 0
    for end in range(1, len(raw) + 1):
        newest = end - 1
        full += raw[newest]
        size += raw[newest]
        tail_tokens += raw[newest]
        while tail < newest and tail_tokens > tail_budget:
            tail_tokens -= raw[tail]
            tail += 1
        if size + noted <= limit:
            continue
        # Prune everything older than the tail: free, and the lowest landing.
        while prune < tail:
            full -= raw[prune] - pruned[prune]
            if prune >= drop:
                size -= raw[prune] - pruned[prune]
            prune += 1
        if full <= limit:
            # Truncation is the last resort: what fits once pruned drops nothing.
            drop, size, noted = 0, full, 0
            continue
        # The note lists what it replaces, so its size follows the cut: move the cut
        # by the note's price so far, then price the note again, until both fit.
        while size + noted > low_water and drop < newest:
            while size + noted > low_water and drop < newest:
                if not stays[drop]:
                    size -= pruned[drop] if drop < prune else raw[drop]
                drop += 1
            noted = note(drop)
        if full - size <= noted:
            # A note never replaces what costs no more than the note.
            drop, size, noted = 0, full, 0
        prune = max(prune, drop)
    return Cuts(prune, drop)


settle = replay_cuts
"""The former name of :func:`replay_cuts`."""
