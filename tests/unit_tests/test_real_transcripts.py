"""Real agent transcripts pass through at 8k, 16k and 32k with every invariant holding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langchain_context_pipeline import DIGEST, ContextPipeline, estimate_tokens
from langchain_context_pipeline.cli.transcripts import load_transcript
from tests.support.fakes import EchoSummarizer
from tests.support.invariants import (
    assert_last_kept,
    assert_pairs_kept,
    assert_systems_kept,
    snapshot,
)

TRANSCRIPTS = sorted((Path(__file__).parents[1] / "data" / "transcripts").glob("*.json"))


def test_transcripts_are_bundled() -> None:
    assert len(TRANSCRIPTS) >= 5


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("threshold", [8000, 16_000, 32_000])
@pytest.mark.parametrize("model", [None, "digest", "echo"])
def test_invariants_hold_on_real_transcripts(path: Path, threshold: int, model: str | None) -> None:
    messages, _ = load_transcript(path)
    summarizer: Any = {"echo": EchoSummarizer(), "digest": DIGEST}.get(model or "")
    pipeline = ContextPipeline(threshold=threshold, tail_budget=threshold // 4, model=summarizer)
    before = snapshot(messages)
    out = pipeline.invoke(messages)
    assert snapshot(messages) == before
    if estimate_tokens(messages) <= threshold:
        assert out is messages
        return
    assert estimate_tokens(out) <= threshold
    assert_pairs_kept(messages, out)
    assert_systems_kept(messages, out)
    assert_last_kept(messages, out)
    assert out[: min(2, len(out))] == messages[:2] or "chars trimmed" in str(out[1].content)
    assert pipeline.invoke(out) is out
    again = ContextPipeline(threshold=threshold, tail_budget=threshold // 4, model=summarizer)
    assert snapshot(again.invoke(messages)) == snapshot(out)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_turn_by_turn_replay_never_overflows_or_orphans(path: Path) -> None:
    messages, _ = load_transcript(path)
    pipeline = ContextPipeline(threshold=8000, tail_budget=2000, model=DIGEST)
    running = None
    for end in range(1, len(messages) + 1):
        if messages[end - 1].type != "ai":
            continue
        request = messages[: end - 1]
        if not request:
            continue
        result = pipeline.compress(request, carried_summary=running)
        running = result.carried_summary
        assert estimate_tokens(result.messages) <= 8000
        assert_pairs_kept(request, result.messages)
