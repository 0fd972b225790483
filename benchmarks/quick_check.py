"""The quick benchmark as a function, for a test to call and check.

``run_quick()`` replays the quick transcripts at 16k (and four token-corpus
conversations at 4k) through every strategy, with few timing repeats, no
tiktoken (no network) and real tokens counted by cl100k_base alone (quicktok,
offline), and returns the same dict the command writes as JSON. Nothing is
written to disk.

Useful keys for a test::

    out = run_quick()
    totals = out["windows"]["16000"]["totals"]
    totals["ours_condense"]["overflows"], totals["ours_condense"]["orphans"]
    totals["ours_default"]["unanswered"], totals["ours_default"]["errors"]
    out["scaling"]["sizes"][0]["noop_returns_same_list"]
    out["targets"]  # rows with "met"
    totals["ours_default"]["real_tokens"]["overflows"]["cl100k_base"]
    out["corpus"]["windows"]["4000"]["totals"]["ours_condense"]["real_tokens"]
    invariants(out)  # [] when ours never overflowed (by the estimate or cl100k_base),
                     # orphaned, left a call or raised
"""

from __future__ import annotations

from typing import Any

from benchmarks.collect import collect
from benchmarks.run import invariant_failures


def run_quick(*, with_scaling: bool = True) -> dict[str, Any]:
    """Run the quick benchmark in memory and return every figure."""
    return collect(
        quick=True,
        with_tiktoken=False,
        with_scaling=with_scaling,
        command="benchmarks.quick_check.run_quick()",
    )


def invariants(out: dict[str, Any]) -> list[str]:
    """What our budgeted strategies got wrong (overflows, broken pairs, errors); [] if none."""
    return invariant_failures(out)
