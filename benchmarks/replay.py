"""Replay every transcript turn by turn through every strategy and measure each request."""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from benchmarks.data import Transcript
from benchmarks.fake import FakeSummarizer
from benchmarks.metrics import (
    CACHED_PRICE,
    OUTPUT_PRICE,
    Counter,
    RunStats,
    check_pairs,
    common_prefix,
)
from benchmarks.real_tokens import RealTokenCounter, RealTokenStats
from benchmarks.recoverable import recoverable
from benchmarks.strategies import STRATEGIES, Strategy
from benchmarks.texts import Fingerprint, haystack, task_text
from benchmarks.window import next_step


@dataclass
class WindowResult:
    """Every strategy on every transcript at one window."""

    window: int
    runs: dict[str, dict[str, RunStats]] = field(default_factory=dict)
    """``runs[strategy_key][transcript_name]``."""
    strategies: list[Strategy] = field(default_factory=list)
    wall_s: float = 0.0
    error_samples: list[str] = field(default_factory=list)

    def total(self, key: str) -> RunStats:
        out = RunStats()
        for stats in self.runs[key].values():
            out.add(stats)
        return out


def replay_one(
    strategy: Strategy,
    transcript: Transcript,
    second: Callable[[Sequence[BaseMessage]], int] | None,
    errors: list[str],
    real: RealTokenCounter | None = None,
) -> RunStats:
    """Replay one transcript through one strategy; return its measurements.

    With ``real``, each request is also counted by real tokenizers and by the
    strategy's own counter (``stats.real``).
    """
    messages = transcript.messages()
    strategy.start()
    strategy.fake.reset()
    counter = Counter(second)
    history_counter = Counter()
    stats = RunStats()
    stats.real = RealTokenStats(own_counter=strategy.own_counter)
    task = task_text(messages)
    previous: list[Fingerprint] = []
    model_input: list[BaseMessage] = []
    history: list[BaseMessage] = []
    history_hay = ""
    start = 0
    for end in transcript.request_ends:
        history = messages[:end]
        new = messages[start:end]
        start = end
        before_fake = strategy.fake.elapsed_ns
        before_calls = len(strategy.fake.calls)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model_input = strategy.step(history, new)
            except Exception as exc:  # a crash is a finding, not the end of the run
                stats.errors += 1
                if len(errors) < 20:
                    errors.append(f"{strategy.key} on {transcript.name}: {exc!r}"[:300])
                model_input = history
                strategy.last_ns = 0
        stats.warnings += len(caught)
        spent = strategy.last_ns - (strategy.fake.elapsed_ns - before_fake)
        stats.overhead_us.append(max(spent, 0) / 1000)

        fps, tokens, tokens_2 = counter.measure(model_input)
        shared = common_prefix(previous, fps)
        previous = fps
        total = sum(tokens)
        history_fps, history_tokens, _ = history_counter.measure(history)
        request_hay = haystack(model_input)
        history_hay += "\n\x00\n" + haystack(new)
        if end < len(messages):
            kept, used = next_step(messages[end], history_hay, request_hay)
            stats.next_kept += kept
            stats.next_total += used
        if real is not None and "cl100k_base" in real.names:
            history_real = real.request(history, history_fps)["cl100k_base"]
            if history_real > strategy.window:
                size = real.request(model_input, fps)["cl100k_base"]
                stats.fills.append(size / strategy.window)
        if sum(history_tokens) > strategy.window:
            stats.requests_beyond += 1
            stats.cost_beyond += (total - sum(tokens[:shared])) + CACHED_PRICE * sum(
                tokens[:shared]
            )
            for call in strategy.fake.calls[before_calls:]:
                stats.cost_beyond += call.input_tokens + OUTPUT_PRICE * call.output_tokens
        stats.requests += 1
        stats.input_tokens += total
        stats.cached_tokens += sum(tokens[:shared])
        stats.input_tokens_tiktoken += sum(tokens_2)
        stats.cached_tokens_tiktoken += sum(tokens_2[:shared])
        stats.max_input = max(stats.max_input, total)
        if total > strategy.window:
            stats.overflows += 1
        if real is not None:
            own = (
                real.own(strategy.own_counter, model_input, fps)
                if strategy.own_counter is not None
                else None
            )
            stats.real.record(strategy.window, real.request(model_input, fps), own)
        orphans, unanswered = check_pairs(model_input)
        stats.orphans += orphans
        stats.unanswered += unanswered
        stats.broken_requests += int(bool(orphans or unanswered))
        if task is not None and task not in request_hay:
            stats.task_lost += 1

    stats.summaries_written = strategy.summaries
    for call in strategy.fake.calls:
        stats.summarizer_calls += 1
        stats.summarizer_input += call.input_tokens
        stats.summarizer_output += call.output_tokens
        stats.summarizer_input_tiktoken += call.input_tokens_tiktoken or 0
        stats.summarizer_output_tiktoken += call.output_tokens_tiktoken or 0
    if transcript.request_ends:
        stats.recoverable = recoverable(
            history,
            model_input,
            references=strategy.ours,
            offloaded=strategy.offloaded(model_input),
            evicts=strategy.evicts,
        )
    return stats


def replay(
    transcripts: Sequence[Transcript],
    window: int,
    second: Callable[[Sequence[BaseMessage]], int] | None = None,
    strategies: Sequence[type[Strategy]] = STRATEGIES,
    progress: Callable[[str], None] | None = None,
    real: RealTokenCounter | None = None,
    collect_garbage: bool = True,
) -> WindowResult:
    """Replay ``transcripts`` through ``strategies`` at ``window`` tokens.

    ``real`` (one for the whole run, so each distinct message is tokenized once)
    adds the overflows by real tokenizers and by each strategy's own counter.
    ``collect_garbage``: run a full collection before each transcript, so that no
    strategy's overhead pays for another's garbage (about 0.2 s each with the
    peers imported; a replay that reads no timing can skip it).
    """
    began = time.perf_counter()
    result = WindowResult(window=window)
    for cls in strategies:
        fake = FakeSummarizer()
        fake.set_second_counter(second)
        strategy = cls(window, fake)
        result.strategies.append(strategy)
        runs: dict[str, RunStats] = {}
        t0 = time.perf_counter()
        for transcript in transcripts:
            if collect_garbage:
                gc.collect()
            runs[transcript.name] = replay_one(
                strategy, transcript, second, result.error_samples, real
            )
        result.runs[strategy.key] = runs
        if progress is not None:
            progress(f"  {window // 1000}k {strategy.label}: {time.perf_counter() - t0:.1f} s")
    result.wall_s = time.perf_counter() - began
    return result
