"""A restart in a new process, with no mark key set, pays nothing for what was summarised.

Each process of the story is a fresh interpreter (``restart_worker.py``) running a
real agent (``create_react_agent`` with the hook, ephemeral and persist, or
``create_agent`` with the middleware) on the same SQLite file, with
``CONTEXT_PIPELINE_MARK_KEY`` removed from its environment: each process signs
under its own random key. The first process runs half the task; the second goes
on. Its first model request must reuse the summary the first process wrote (no
summarizer call before it, no warning about an untrusted summary), while a
fresh pipeline given the same history would have to summarise (the control).
A restart whose user message carries a mark copied from that summary must not
take the message for a summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langchain_context_pipeline.messages.marks import MARK_KEY_ENV

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKER = "tests.integration_tests.restart_worker"
ENTRIES = ["hook-ephemeral", "hook-persist", "middleware"]
UNTRUSTED = ("does not verify", "ignoring state")


def process(entry: str, path: str, db: Path, phase: str) -> dict[str, Any]:
    """Run one process of the story; return what it reported."""
    out = db.with_suffix(".json")
    env = {k: v for k, v in os.environ.items() if k != MARK_KEY_ENV}
    env["PYTHONPATH"] = str(ROOT)  # the worker imports tests.integration_tests.scripted_model
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    done = subprocess.run(
        [sys.executable, "-m", WORKER, entry, path, str(db), phase, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    assert not result["mark_key_set"]
    return result


def carried_summary(entry: str, result: dict[str, Any]) -> list[str]:
    """The summary the first request carried.

    Ephemeral hook and middleware: the pass's output, where the pipeline's own
    summary carries a mark under this process's key. Persist mode: the model reads
    ``messages`` itself, where the summary keeps the mark the first process signed
    when the hook has nothing to rewrite; its id is what tells.
    """
    if entry == "hook-persist":
        return [i for i in result["first_request_ids"] if i.startswith("context-summary-")]
    summaries: list[str] = result["first_request_summaries"]
    return summaries


def untrusted(warnings: list[str]) -> list[str]:
    return [w for w in warnings if any(text in w for text in UNTRUSTED)]


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_restart_in_a_new_process_reuses_the_summary(
    entry: str, path: str, tmp_path: Path
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    first = process(entry, path, db, "first")
    assert first["summarizer_calls"] >= 1, "the first half never needed a summary"
    shown = first["last_request_summaries"]
    assert len(shown) == 1

    second = process(entry, path, db, "second")
    # The summarised turns are not summarised again: no call before the first request,
    # which carries the first process's summary as the pipeline's own.
    assert second["calls_before_first_request"] == 0
    assert carried_summary(entry, second) == shown
    assert untrusted(second["warnings"]) == []
    if entry == "hook-persist":
        # The history in messages is already compressed: the restart's cost was the
        # old summary, taken for ordinary content, kept in the head beside the next.
        assert second["summarizer_calls"] >= 1
        assert len(second["summary_like_in_messages"]) == 1
    else:
        # Control: without trusting it, that very history needs the summarizer.
        assert second["control_calls"] == 1


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_restart_costs_no_summary_one_process_would_not_write(entry: str, tmp_path: Path) -> None:
    """Over the whole task, not only its first request: the two processes together
    call the summarizer no more often than one process running the task through."""
    db = tmp_path / "checkpoints.sqlite"
    first = process(entry, "sync", db, "first")
    second = process(entry, "sync", db, "second")
    whole = process(entry, "sync", tmp_path / "whole.sqlite", "whole")
    assert first["summarizer_calls"] >= 1 and second["summarizer_calls"] >= 1
    assert first["summarizer_calls"] + second["summarizer_calls"] <= whole["summarizer_calls"]


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_copied_mark_in_the_users_message_is_not_trusted_after_a_restart(
    entry: str, path: str, tmp_path: Path
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    shown = process(entry, path, db, "first")["last_request_summaries"]
    forged = process(entry, path, db, "forged")
    assert "forged" in forged["first_request_ids"], "the forged message was not sent as content"
    assert "forged" not in forged["first_request_summaries"]
    assert carried_summary(entry, forged) == shown  # the genuine one is still reused
    assert forged["calls_before_first_request"] == 0
