"""The quick benchmark runs in `make test`, so its harness cannot rot."""

from __future__ import annotations

import pytest

from benchmarks.quick_check import invariants, run_quick

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_quick_benchmark_runs_and_ours_keeps_every_invariant() -> None:
    out = run_quick()
    assert invariants(out) == []
    totals = out["windows"]["16000"]["totals"]
    for strategy in ("ours_condense", "ours_default"):
        assert totals[strategy]["overflows"] == 0
        assert totals[strategy]["orphans"] == 0
        assert totals[strategy]["unanswered"] == 0
    # The harness measured the peers too, and no management overflows at 16k.
    assert totals["none"]["overflows"] > 0
    assert {"lc_summarization", "lc_context_editing", "langmem", "trim", "deepagents"} <= set(
        totals
    )
    assert out["scaling"]["sizes"][0]["noop_returns_same_list"]
