"""The three commands: ``compress``, ``report`` and ``replay``.

Each takes the parsed options and the two output streams and returns the exit
code; a user mistake is raised as :class:`~.options.UsageError` or
:class:`~.transcript_errors.TranscriptError` and reported by the caller.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from langchain_context_pipeline.cli import render
from langchain_context_pipeline.cli.options import UsageError, build_pipeline
from langchain_context_pipeline.cli.transcripts import dump_transcript, load_transcript
from langchain_context_pipeline.replay import ReplayResult, replay

__all__ = ["COMMANDS", "compress", "replay_command", "report"]


def compress(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the compressed transcript in its own layout; one report line to ``err``.

    Args:
        args: ``file``, ``output`` and the pipeline options.
        out: Where the transcript goes without ``--output``.
        err: Where the report line goes.

    Returns:
        0.

    Raises:
        UsageError: If the output file cannot be written.
    """
    pipeline = build_pipeline(args)
    messages, fmt = load_transcript(args.file)
    started = time.perf_counter()
    result = pipeline.compress(messages)
    elapsed = time.perf_counter() - started
    text = dump_transcript(result.messages, fmt)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        out.write(text if text.endswith("\n") else text + "\n")
    print(render.report_line(args.file, result.report, elapsed), file=err)
    return 0


def report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print what each stage saved, per file and in total (a table, or ``--json``).

    Args:
        args: ``files``, ``json`` and the pipeline options.
        out: Where the table or JSON goes.
        err: Where progress goes.

    Returns:
        0.
    """
    pipeline = build_pipeline(args)
    loaded = [(name, load_transcript(name)[0]) for name in args.files]
    rows = []
    with render.progress(len(loaded), err) as advance:
        for name, messages in loaded:
            started = time.perf_counter()
            result = pipeline.compress(messages)
            elapsed = time.perf_counter() - started
            rows.append(render.report_row(Path(name).name, len(messages), result.report, elapsed))
            advance(name)
    total = render.total_row(rows)
    if args.json:
        json.dump({"threshold": pipeline.threshold, "files": rows, "total": total}, out, indent=2)
        out.write("\n")
        return 0
    summarizer = "digest" if pipeline.model is None else type(pipeline.model).__name__
    print(
        f"threshold {pipeline.threshold:,} tokens, tail {pipeline.tail_budget:,}, "
        f"condense: {summarizer}",
        file=out,
    )
    render.print_table(
        [header for header, _ in render.REPORT_COLUMNS],
        [[row[key] for _, key in render.REPORT_COLUMNS] for row in [*rows, total]],
        out,
    )
    saved = total["tokens_before"] - total["tokens_after"]
    share = saved / total["tokens_before"] if total["tokens_before"] else 0.0
    print(f"saved {saved:,} of {total['tokens_before']:,} tokens ({share:.0%})", file=out)
    return 0


def replay_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the tokens sent per turn with and without the pipeline; ``--plot`` saves a chart.

    Args:
        args: ``file``, ``plot`` and the pipeline options.
        out: Where the table goes.
        err: Where the plot's file name is confirmed.

    Returns:
        0.

    Raises:
        UsageError: If ``--plot`` is asked for without matplotlib, or cannot be written.
    """
    if args.plot:
        try:
            import matplotlib
        except ImportError:
            raise UsageError(
                "--plot needs matplotlib: pip install 'langchain-context-pipeline[plot]'"
            ) from None
        matplotlib.use("Agg")
    pipeline = build_pipeline(args)
    messages, _ = load_transcript(args.file)
    result = replay(messages, pipeline)
    render.print_replay(result, out)
    if args.plot:
        _plot(result, pipeline.threshold, Path(args.file).name, args.plot)
        print(f"plot written to {args.plot}", file=err)
    return 0


def _plot(result: ReplayResult, threshold: int, title: str, target: str) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    xs = [t.index for t in result.turns]
    axes.plot(xs, [t.tokens_without for t in result.turns], label="without")
    axes.plot(xs, [t.tokens_with for t in result.turns], label="with the pipeline")
    axes.axhline(threshold, linestyle="--", color="grey", label="threshold")
    axes.set_xlabel("message index of the model call")
    axes.set_ylabel("tokens sent")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    try:
        figure.savefig(target)
    except OSError as exc:
        raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO, TextIO], int]] = {
    "compress": compress,
    "report": report,
    "replay": replay_command,
}
"""The commands by name."""
