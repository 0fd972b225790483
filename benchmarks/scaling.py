"""Per-call overhead and peak memory on synthetic histories of 100 to 10,000 messages.

A synthetic history is the system prompt and task of a real transcript followed by
tool-call units and assistant/user turns drawn at random (fixed seed) from the
native-tool transcripts, with fresh ids, so sizes and shapes follow real agents.
The same list is handed to each operation:

- ``count_tokens_approximately(history)``: the reference cost of one look at it;
- ``trim_messages(history, strategy="last", max_tokens=..., start_on="human",
  include_system=True, token_counter=count_tokens_approximately)``;
- ours, no-op path: ``ContextPipeline(threshold=<above the total>).compress``;
- ours, prune path: ``ContextPipeline(threshold=<total - 1>, tail_budget=8000)``,
  where pruning alone gets under the threshold (checked): warm (called again on the
  same list), cold (its Pruner's memo emptied first), and fresh (each call on a new
  copy of the history read back from JSON, as a checkpointer gives it back at the
  start of a turn: every message, and every string in it, a new object, so no memo
  keyed by a message's identity hits).

Sizes and operations are timed round-robin, each size's repeats spread over the whole
run (so load from elsewhere hits every figure alike), after a warm-up, with the objects
that existed before timing frozen out of the garbage collector.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from benchmarks.data import Transcript
from benchmarks.metrics import percentile
from langchain_context_pipeline import ContextPipeline, estimate_tokens

SIZES = (100, 1_000, 10_000)
SEED = 20261130
TAIL_BUDGET = 8000

OPS = (
    "count_tokens_approximately",
    "trim_messages",
    "ours_noop",
    "ours_prune",
    "ours_prune_cold",
    "ours_prune_fresh",
)


def _units(transcripts: Sequence[Transcript]) -> list[list[BaseMessage]]:
    """Cut the native transcripts into units: a call and its results, or one message."""
    units: list[list[BaseMessage]] = []
    for transcript in transcripts:
        messages = transcript.messages()
        if not any(isinstance(m, ToolMessage) for m in messages):
            continue
        index = 2
        while index < len(messages):
            message = messages[index]
            unit = [message]
            index += 1
            if isinstance(message, AIMessage) and message.tool_calls:
                ids = {c["id"] for c in message.tool_calls}
                while (
                    index < len(messages)
                    and isinstance(messages[index], ToolMessage)
                    and messages[index].tool_call_id in ids  # type: ignore[attr-defined]
                ):
                    unit.append(messages[index])
                    index += 1
                if len(unit) == 1:
                    continue  # an unanswered call: leave it out
            elif isinstance(message, ToolMessage):
                continue
            units.append(unit)
    return units


def _renamed(unit: list[BaseMessage], serial: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    mapping: dict[str, str] = {}
    for offset, message in enumerate(unit):
        new_id = f"s{serial}_{offset}"
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = []
            for k, call in enumerate(message.tool_calls):
                mapping[call["id"] or ""] = f"c{serial}_{k}"
                calls.append({**call, "id": mapping[call["id"] or ""]})
            out.append(message.model_copy(update={"id": new_id, "tool_calls": calls}))
        elif isinstance(message, ToolMessage):
            out.append(
                message.model_copy(
                    update={"id": new_id, "tool_call_id": mapping[message.tool_call_id]}
                )
            )
        else:
            out.append(message.model_copy(update={"id": new_id}))
    return out


def synthetic_history(transcripts: Sequence[Transcript], size: int) -> list[BaseMessage]:
    """Return a history of exactly ``size`` messages drawn from ``transcripts``."""
    rng = random.Random(SEED + size)
    units = _units(transcripts)
    seed_transcript = next(
        t for t in transcripts if any(isinstance(m, ToolMessage) for m in t.messages())
    )
    history = seed_transcript.messages()[:2]
    serial = 0
    while len(history) < size:
        unit = rng.choice(units)
        if len(history) + len(unit) > size:
            unit = [m for m in unit if not isinstance(m, AIMessage | ToolMessage)]
            if not unit:
                unit = [AIMessage(content="Continuing.")]
        history.extend(_renamed(unit, serial))
        serial += 1
    return history[:size]


@dataclass
class OpResult:
    """One operation on one history."""

    median_us: float
    min_us: float
    p95_us: float
    peak_kib: float
    repeats: int


@dataclass
class SizeResult:
    """Every operation on one synthetic history."""

    size: int
    tokens: int
    chars: int
    ops: dict[str, OpResult] = field(default_factory=dict)
    prune_stages: list[str] = field(default_factory=list)
    noop_same_object: bool = False


class _Fresh:
    """The prune path on a history just loaded: every message a new object.

    :meth:`prepare` reads the history back from its JSON (as a checkpointer does at the
    start of a turn) before each timed call, outside the timing; the call compresses
    that copy with the same pipeline, whose memos then hold nothing for it.
    """

    def __init__(self, pipeline: ContextPipeline, history: list[BaseMessage]) -> None:
        self.pipeline = pipeline
        self.blob = json.dumps(messages_to_dict(history))
        self.copy: list[BaseMessage] | None = None
        self.done: list[BaseMessage] | None = None

    def prepare(self) -> None:
        """Load the copy the next call compresses, and let the last one go (untimed)."""
        self.done = None
        self.copy = self._load()

    def _load(self) -> list[BaseMessage]:
        return messages_from_dict(json.loads(self.blob))

    def __call__(self) -> Any:
        copy, self.copy = self.copy, None
        if copy is None:  # a call that was not prepared (the warm-up)
            copy = self._load()
        self.done = copy  # freed by the next prepare, not inside the timing
        return self.pipeline.compress(copy)


def _prepare(fn: Callable[[], Any]) -> None:
    """Do an operation's untimed set-up for its next call, if it has one."""
    prepare = getattr(fn, "prepare", None)
    if prepare is not None:
        prepare()


def _operations(history: list[BaseMessage]) -> tuple[dict[str, Callable[[], Any]], SizeResult]:
    total = estimate_tokens(history)
    noop = ContextPipeline(threshold=total + 1, tail_budget=min(TAIL_BUDGET, total))
    prune = ContextPipeline(threshold=total - 1, tail_budget=min(TAIL_BUDGET, total - 2))
    cold = ContextPipeline(threshold=total - 1, tail_budget=min(TAIL_BUDGET, total - 2))
    fresh = ContextPipeline(threshold=total - 1, tail_budget=min(TAIL_BUDGET, total - 2))

    def prune_cold() -> Any:
        # The Pruner's memo emptied; the anatomies and counts of these very messages
        # are still remembered (a first call on new objects is `ours_prune_fresh`).
        cold.pruner._memo.clear()
        return cold.compress(history)

    trim_to = max(total // 4, 1)
    info = SizeResult(
        size=len(history),
        tokens=total,
        chars=sum(len(str(m.content)) for m in history),
    )
    info.noop_same_object = noop.compress(history).messages is history
    info.prune_stages = list(prune.compress(history).report.stages)
    ops: dict[str, Callable[[], Any]] = {
        "count_tokens_approximately": lambda: count_tokens_approximately(history),
        "trim_messages": lambda: trim_messages(
            history,
            strategy="last",
            max_tokens=trim_to,
            start_on="human",
            include_system=True,
            token_counter=count_tokens_approximately,
        ),
        "ours_noop": lambda: noop.compress(history),
        "ours_prune": lambda: prune.compress(history),
        "ours_prune_cold": prune_cold,
        "ours_prune_fresh": _Fresh(fresh, history),
    }
    return ops, info


def _peak_kib(fn: Callable[[], Any]) -> float:
    _prepare(fn)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return max(peak - base, 0) / 1024


def measure(
    transcripts: Sequence[Transcript],
    sizes: Sequence[int] = SIZES,
    repeats: Callable[[int], int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[SizeResult]:
    """Time every operation on every size, interleaved so noise hits them alike."""
    if repeats is None:

        def repeats(size: int) -> int:
            return {100: 200, 1_000: 60, 10_000: 12}.get(size, 10)

    built: list[tuple[int, dict[str, Callable[[], Any]], SizeResult]] = []
    for size in sizes:
        ops, info = _operations(synthetic_history(transcripts, size))
        for fn in ops.values():
            fn()  # warm-up
        built.append((size, ops, info))
    counts = {size: repeats(size) for size in sizes}
    rounds = max(counts.values())
    samples: dict[int, dict[str, list[float]]] = {
        size: {name: [] for name in ops} for size, ops, _ in built
    }
    # Sizes and operations are interleaved, each size's repeats spread evenly over the
    # whole run, so load from elsewhere on the machine hits every figure alike. Objects
    # that exist before timing (the harness's own, the histories) are frozen out of the
    # collector's reach, so a collection costs what the operation allocated.
    gc.collect()
    gc.freeze()
    try:
        for r in range(rounds):
            for size, ops, _ in built:
                if (r * counts[size]) // rounds == ((r + 1) * counts[size]) // rounds:
                    continue
                for name, fn in ops.items():
                    _prepare(fn)
                    start = time.perf_counter_ns()
                    fn()
                    samples[size][name].append((time.perf_counter_ns() - start) / 1000)
    finally:
        gc.unfreeze()
    out: list[SizeResult] = []
    for size, ops, info in built:
        for name, fn in ops.items():
            values = samples[size][name]
            info.ops[name] = OpResult(
                median_us=statistics.median(values),
                min_us=min(values),
                p95_us=percentile(values, 0.95) or 0.0,
                peak_kib=_peak_kib(fn),
                repeats=len(values),
            )
        out.append(info)
        if progress is not None:
            progress(
                f"  scaling {size:>6} msgs: "
                + ", ".join(f"{n} {r.median_us:,.0f} µs" for n, r in info.ops.items())
            )
    return out
