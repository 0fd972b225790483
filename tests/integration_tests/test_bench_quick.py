"""The quick benchmark runs in `make test`, so its harness cannot rot."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchmarks.quick_check import invariants, run_quick
from benchmarks.targets import evaluate

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


def test_targets_render_a_results_file_from_before_an_operation_was_timed() -> None:
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results.json"
    out = json.loads(results.read_text(encoding="utf-8"))
    labels = [row["target"] for row in evaluate(out)]
    fresh = [label for label in labels if "just loaded" in label]
    assert len(fresh) == 1
    older = copy.deepcopy(out)
    for size in older["scaling"]["sizes"]:
        del size["ops"]["ours_prune_fresh"]
    older_labels = [row["target"] for row in evaluate(older)]
    # The row of the operation the file lacks is left out; every other row stays.
    assert older_labels == [label for label in labels if label not in fresh]
