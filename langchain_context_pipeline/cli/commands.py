"""The three commands: ``compress``, ``report`` and ``replay``.

Each takes the parsed options and the streams and returns the exit code; a user
mistake is raised as :class:`~.options.UsageError` or
:class:`~.transcript_errors.TranscriptError` and reported by the caller. A budget
the transcript cannot meet (:class:`~langchain_context_pipeline.BudgetError`) is
a user mistake too: the threshold is too small for it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.cli import render
from langchain_context_pipeline.cli.options import UsageError, build_pipeline
from langchain_context_pipeline.cli.table import display_names, print_report_table
from langchain_context_pipeline.cli.transcripts import (
    TranscriptFormat,
    dump_transcript,
    load_transcript,
    parse_transcript,
)
from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.core.replay import ReplayResult, Turn, replay
from langchain_context_pipeline.errors import BudgetError

__all__ = ["COMMANDS", "STDIN", "Streams", "compress", "replay_command", "report"]

STDIN = "-"
"""The file name that means standard input."""

_STDIN_SOURCE = "<stdin>"


@dataclass
class Streams:
    """Where a command reads standard input and writes its results and messages."""

    out: TextIO
    """Results: a transcript, a table, JSON."""
    err: TextIO
    """Progress, the ``compress`` report, errors."""
    stdin: BinaryIO
    """Read for the file ``-``, once."""
    stdin_used: bool = field(default=False)


def compress(args: argparse.Namespace, streams: Streams) -> int:
    """Write the compressed transcript in its own layout; its report to stderr.

    The report is one line, or with ``--json`` the object ``report --json``
    prints for this one file.

    Args:
        args: ``file``, ``output``, ``json`` and the pipeline options.
        streams: The transcript goes to ``out`` without ``--output``; the report to ``err``.

    Returns:
        0.

    Raises:
        UsageError: If the output file cannot be written, or the threshold is
            too small for the transcript.
    """
    pipeline = build_pipeline(args)
    messages, fmt = _load(args.file, streams)
    started = time.perf_counter()
    with _for_file(args.file):
        result = pipeline.compress(messages)
    elapsed = time.perf_counter() - started
    text = dump_transcript(result.messages, fmt)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        _write_utf8(streams.out, text)
    if args.json:
        row = render.report_row(args.file, len(messages), result.report, elapsed)
        render.print_json(_report_json(pipeline, [row]), streams.err)
    else:
        print(render.report_line(_shown(args.file), result.report, elapsed), file=streams.err)
    return 0


def report(args: argparse.Namespace, streams: Streams) -> int:
    """Print what each stage saved, per file and in total (a table, or ``--json``).

    Args:
        args: ``files``, ``json`` and the pipeline options.
        streams: The table or JSON goes to ``out``, progress to ``err``.

    Returns:
        0.

    Raises:
        UsageError: If the threshold is too small for a transcript.
    """
    pipeline = build_pipeline(args)
    loaded = [(name, _load(name, streams)[0]) for name in args.files]
    labels = display_names(args.files)
    rows = []
    with render.progress(streams.err) as advance:
        for label, (name, messages) in zip(labels, loaded, strict=True):
            started = time.perf_counter()
            with _for_file(name):
                result = pipeline.compress(messages)
            elapsed = time.perf_counter() - started
            rows.append(render.report_row(name, len(messages), result.report, elapsed))
            advance(label, len(loaded))
    if args.json:
        render.print_json(_report_json(pipeline, rows), streams.out)
        return 0
    total = render.total_row(rows)
    out = streams.out
    print(
        f"threshold {pipeline.threshold:,} tokens, tail {pipeline.tail_budget:,}, "
        f"condense: {_summarizer_name(pipeline)}",
        file=out,
    )
    print_report_table(rows, total, out)
    saved = total["tokens_before"] - total["tokens_after"]
    share = saved / total["tokens_before"] if total["tokens_before"] else 0.0
    print(f"saved {saved:,} of {total['tokens_before']:,} tokens ({share:.0%})", file=out)
    return 0


def replay_command(args: argparse.Namespace, streams: Streams) -> int:
    """Print the tokens sent per turn with and without the pipeline; ``--plot`` saves a chart.

    Progress goes to stderr: a live bar on a terminal; elsewhere one line per
    turn when a summarizer model makes the turns slow.

    Args:
        args: ``file``, ``plot``, ``json`` and the pipeline options.
        streams: The table or JSON goes to ``out``, progress and the plot's name to ``err``.

    Returns:
        0.

    Raises:
        UsageError: If ``--plot`` is asked for without matplotlib, or cannot be
            written; or the threshold is too small for the transcript.
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
    messages, _ = _load(args.file, streams)
    with render.progress(streams.err, lines=pipeline.model is not None) as advance:

        def on_turn(turn: Turn, total: int) -> None:
            advance(f"turn at message {turn.index}: {turn.tokens_with:,} tokens sent", total)

        with _for_file(args.file):
            result = replay(messages, pipeline, on_turn=on_turn)
    if args.json:
        value = {**_settings(pipeline), **render.replay_json(args.file, result)}
        render.print_json(value, streams.out)
    else:
        render.print_replay(result, streams.out)
    if args.plot:
        _plot(result, pipeline.threshold, display_names([args.file])[0], args.plot)
        print(f"plot written to {args.plot}", file=streams.err)
    return 0


def _load(name: str, streams: Streams) -> tuple[list[BaseMessage], TranscriptFormat]:
    """Read the transcript ``name``; ``-`` reads standard input (once)."""
    if name != STDIN:
        return load_transcript(name)
    if streams.stdin_used:
        raise UsageError("'-' (standard input) can be given only once")
    streams.stdin_used = True
    return parse_transcript(streams.stdin.read(), source=_STDIN_SOURCE)


@contextmanager
def _for_file(name: str) -> Iterator[None]:
    """Turn a budget the transcript cannot meet into a one-line mistake naming the file."""
    try:
        yield
    except BudgetError as exc:
        raise UsageError(f"{_shown(name)}: {exc}") from None


def _shown(name: str) -> str:
    return _STDIN_SOURCE if name == STDIN else render.escape_controls(name)


def _summarizer_name(pipeline: ContextPipeline) -> str:
    return "digest" if pipeline.model is None else type(pipeline.model).__name__


def _settings(pipeline: ContextPipeline) -> dict[str, Any]:
    return {
        "threshold": pipeline.threshold,
        "tail_budget": pipeline.tail_budget,
        "summarizer": _summarizer_name(pipeline),
    }


def _report_json(pipeline: ContextPipeline, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_settings(pipeline), "files": rows, "total": render.total_row(rows)}


def _write_utf8(out: TextIO, text: str) -> None:
    """Write a transcript as UTF-8 whatever the locale (bytes to a real stream's buffer)."""
    buffer: BinaryIO | None = getattr(out, "buffer", None)
    if buffer is None:
        out.write(text)
        return
    out.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


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


COMMANDS: dict[str, Callable[[argparse.Namespace, Streams], int]] = {
    "compress": compress,
    "report": report,
    "replay": replay_command,
}
"""The commands by name."""
