"""How often a message is parsed, and what the prune path costs: ``python -m benchmarks.parse``.

1. Replays one bundled transcript turn by turn (each request the agent made, the
   history growing by the messages of that turn) through
   ``ContextPipeline(threshold=32000).compress(...)``, as ``benchmarks.ours``
   drives the pipeline, and prints, per turn, the message anatomies built
   (:func:`langchain_context_pipeline.messages.anatomy.build_count`) against the
   messages that are new to that turn. A message the pipeline has read before
   costs no build; what the pass itself writes (pruned copies, notes, summaries)
   is new and is read once too.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def replay_builds(messages: list[BaseMessage], threshold: int) -> list[tuple[int, int, int]]:
    """Return ``(history length, new messages, anatomies built)`` for each turn."""
    assert build_count is not None
    pipeline = ContextPipeline(threshold=threshold)
    carried = None
    rows: list[tuple[int, int, int]] = []
    start = 0
    for end in request_ends(messages):
        history = messages[:end]
        before = build_count()
        result = pipeline.compress(history, carried_summary=carried)
        carried = result.carried_summary
        rows.append((end, end - start, build_count() - before))
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
        new = sum(r[1] for r in rows)
        built = sum(r[2] for r in rows)
        extra = [r for r in rows if r[2] != r[1]]
        print(f"anatomy builds: {built:,} over {len(rows)} turns, {new:,} new messages")
        print(f"  turns where builds != new messages: {len(extra)}")
        for end, fresh, count in rows if args.turns else extra[:10]:
            print(f"  turn at {end:4} messages: {fresh:3} new, {count:4} built")
    print(f"cost / count_tokens_approximately (best of {args.repeat}):")
    for share in (4, 2, 1):
        history = messages[: len(messages) // share]
        found = ratios(history, args.threshold, args.repeat)
        shown = "  ".join(f"{k} {v:6.1f}x" for k, v in found.items())
        print(f"  {len(history):5} messages: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
