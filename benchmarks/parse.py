"""How often a message is parsed, and what the prune path costs: ``python -m benchmarks.parse``.

1. Replays one bundled transcript turn by turn (each request the agent made, the
   history growing by the messages of that turn) through
   ``ContextPipeline(threshold=32000).compress(...)``, as ``benchmarks.ours``
   drives the pipeline, and prints, per turn, the message anatomies built (each
   miss of the anatomy memo, recorded by :func:`recording_builds`) against the
   messages that are new to that turn, split by whose message each is: new to the
   turn, read at an earlier turn and unchanged since (each such build is a second
   reading: 0 is the target), or written by the pass itself (pruned copies, notes,
   summaries: new objects, each read once).
2. Prints the prune path's cost (``Pruner.prune`` over the whole list, then the
   estimate of its output) and the full ``compress`` as a ratio to
   ``langchain_core.messages.utils.count_tokens_approximately`` over the same
   list, warm (a second call on the same list) and cold (fresh message objects,
   a fresh pipeline), at three history lengths.

Standalone: nothing is written; on a checkout without the anatomy the build
counts are left out and the ratios are still printed.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_pipeline import ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.cli.transcripts import load_transcript
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.tokens.meter import Meter

try:
    from langchain_context_pipeline.messages.anatomy import build_count, one_pass
except ImportError:  # a checkout from before the anatomy
    build_count = None  # type: ignore[assignment]
    one_pass = contextlib.nullcontext  # type: ignore[assignment]

TRANSCRIPTS = Path(__file__).parent / "transcripts"
DEFAULT = "openhands_swebv_django-11149_claude35.json"


def as_blocks(message: BaseMessage) -> BaseMessage:
    """Return ``message`` with its string content as blocks (text, and tool_use per call).

    The bundled transcripts hold string content, which every reader takes by a
    fast path without an anatomy; in block form each message is parsed.
    """
    if not isinstance(message.content, str):
        return message
    blocks: list[Any] = [{"type": "text", "text": message.content}] if message.content else []
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            block = {"type": "tool_use", "id": call["id"], "name": call["name"]}
            blocks.append({**block, "input": call["args"]})
    return message.model_copy(update={"content": blocks})


def request_ends(messages: list[BaseMessage]) -> list[int]:
    """Return the history length at each request: before every assistant message, and all."""
    ends = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and i > 0]
    return [*ends, len(messages)]


@dataclass(frozen=True)
class TurnBuilds:
    """The anatomies one turn built, by whose message they are."""

    end: int
    """The history's length."""
    new: int
    """Messages new to this turn."""
    built: int
    """Anatomies built in all."""
    of_new: int
    """... of messages new to this turn (each at most once is right)."""
    of_unchanged: int
    """... of messages an earlier turn had read, unchanged since (0 is right)."""
    of_written: int
    """... of messages the pass wrote (pruned copies, notes, summaries)."""


@contextlib.contextmanager
def recording_builds() -> Iterator[list[BaseMessage]]:
    """Record each message whose anatomy is built (the anatomy memo missed) meanwhile."""
    from langchain_context_pipeline.messages import anatomy

    built: list[BaseMessage] = []
    build = anatomy._build

    def recorded(message: BaseMessage) -> Any:
        built.append(message)
        return build(message)

    with mock.patch.object(anatomy, "_build", recorded):
        yield built


def replay_builds(messages: list[BaseMessage], threshold: int) -> list[TurnBuilds]:
    """Return the anatomies built at each turn, by whose message they are."""
    assert build_count is not None
    pipeline = ContextPipeline(threshold=threshold)
    carried = None
    rows: list[TurnBuilds] = []
    start = 0
    for end in request_ends(messages):
        history = messages[:end]
        with recording_builds() as built:
            result = pipeline.compress(history, carried_summary=carried)
        carried = result.carried_summary
        old = {id(m) for m in history[:start]}
        new = {id(m) for m in history[start:]}
        rows.append(
            TurnBuilds(
                end,
                end - start,
                len(built),
                sum(1 for m in built if id(m) in new),
                sum(1 for m in built if id(m) in old),
                sum(1 for m in built if id(m) not in old and id(m) not in new),
            )
        )
        start = end
    return rows


def _best(run: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def _fresh(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m.model_copy(deep=True) for m in messages]


def _prune(pruner: Pruner, history: list[BaseMessage]) -> int:
    with one_pass():  # as the pipeline's pass does
        meter = Meter(estimate_tokens)
        where = Split.of(history, 2).with_tail(history, 8000, meter)
        return estimate_tokens(pruner.prune(history, where)[0])


def ratios(history: list[BaseMessage], threshold: int, repeat: int) -> dict[str, float]:
    """Return the prune path's and compress's cost over count_tokens_approximately's."""
    base = _best(lambda: count_tokens_approximately(history), repeat)
    out: dict[str, float] = {}
    pruner = Pruner()
    _prune(pruner, history)
    out["prune warm"] = _best(lambda: _prune(pruner, history), repeat) / base
    pipeline = ContextPipeline(threshold=threshold)
    pipeline.compress(history)
    out["compress warm"] = _best(lambda: pipeline.compress(history), repeat) / base
    copies = [_fresh(history) for _ in range(repeat)]
    cold = iter(copies)
    out["prune cold"] = _best(lambda: _prune(Pruner(), next(cold)), repeat) / base
    copies = [_fresh(history) for _ in range(repeat)]
    cold = iter(copies)
    out["compress cold"] = (
        _best(lambda: ContextPipeline(threshold=threshold).compress(next(cold)), repeat) / base
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the build counts per turn and the cost ratios at three lengths."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parse", description=__doc__)
    parser.add_argument("--transcript", default=DEFAULT, help="file in benchmarks/transcripts")
    parser.add_argument("--threshold", type=int, default=32000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--turns", action="store_true", help="one line per turn")
    parser.add_argument(
        "--strings", action="store_true", help="keep string content (default: as blocks)"
    )
    args = parser.parse_args(argv)
    messages, _ = load_transcript(TRANSCRIPTS / args.transcript)
    if not args.strings:
        messages = [as_blocks(m) for m in messages]
    shape = "string content" if args.strings else "block content"
    print(f"== {args.transcript} ({shape}): {len(messages)} messages, threshold {args.threshold:,}")
    if build_count is None:
        print("anatomy builds: n/a (no messages.anatomy in this checkout)")
    else:
        rows = replay_builds(messages, args.threshold)
        new = sum(r.new for r in rows)
        print(f"anatomy builds: {sum(r.built for r in rows):,} over {len(rows)} turns")
        print(f"  of the {new:,} messages new to their turn: {sum(r.of_new for r in rows):,}")
        print(
            "  of messages an earlier turn read, unchanged since: "
            f"{sum(r.of_unchanged for r in rows):,} (0 is one reading a message)"
        )
        print(
            "  of messages the passes wrote (pruned copies, notes, summaries): "
            f"{sum(r.of_written for r in rows):,}"
        )
        extra = [r for r in rows if r.of_new > r.new or r.of_unchanged]
        print(f"  turns that read a message more than once: {len(extra)}")
        for r in rows if args.turns else extra[:10]:
            print(
                f"  turn at {r.end:4} messages: {r.new:3} new, {r.built:4} built "
                f"({r.of_new} new, {r.of_unchanged} unchanged, {r.of_written} written)"
            )
    print(f"cost / count_tokens_approximately (best of {args.repeat}):")
    for share in (4, 2, 1):
        history = messages[: len(messages) // share]
        found = ratios(history, args.threshold, args.repeat)
        shown = "  ".join(f"{k} {v:6.1f}x" for k, v in found.items())
        print(f"  {len(history):5} messages: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
