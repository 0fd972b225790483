"""What the command line prints: report rows and lines, the replay table, progress, JSON.

Tables are drawn by ``rich`` (the report table's layout is in
:mod:`~langchain_context_pipeline.cli.table`). On a terminal they fit its width and
progress is a live bar on stderr. Written to a file or a pipe, nothing is
coloured, lines are not wrapped unless ``COLUMNS`` sets a width, and progress is
one plain line per step, so logs and tests read it as text.

Example:
    >>> import io
    >>> from langchain_context_pipeline.core.replay import ReplayResult, Turn
    >>> out = io.StringIO()
    >>> print_replay(ReplayResult([Turn(3, 1200, 900, ("prune",), 0)]), out)
    >>> print(out.getvalue().splitlines()[1])
       3    1,200   900       -  prune
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from langchain_context_pipeline.core.replay import ReplayResult
from langchain_context_pipeline.core.report import CompressionReport

__all__ = [
    "console_for",
    "emit",
    "escape_controls",
    "is_terminal",
    "print_json",
    "print_replay",
    "progress",
    "replay_json",
    "report_line",
    "report_row",
    "total_row",
]

# Off a terminal, and without COLUMNS, there is no width to fit: lines are not wrapped.
_UNWRAPPED = 100_000


def is_terminal(stream: TextIO) -> bool:
    """Tell whether ``stream`` is an interactive terminal.

    Args:
        stream: Where output goes.

    Returns:
        ``True`` for a terminal; ``False`` for a file, a pipe or a closed stream.
    """
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def escape_controls(text: str) -> str:
    r"""``text`` with its control characters (a newline, ESC in a file name) escaped as in Python.

    Example:
        >>> print(escape_controls("new\nline\x1b[31m.json"))
        new\nline\x1b[31m.json
    """
    return "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" else c for c in text)


def report_line(name: str, report: CompressionReport, seconds: float) -> str:
    """Summarise one compression in one line (the ``compress`` command's stderr).

    Args:
        name: The transcript's file.
        report: What the pipeline did.
        seconds: How long it took.

    Returns:
        The line, without a newline.
    """
    prune, condense, cut = _stage_figures(report)
    return (
        f"{name}: {report.tokens_before:,} -> {report.tokens_after:,} tokens "
        f"(threshold {report.threshold:,}; stages: {', '.join(report.stages) or 'none'}; "
        f"briefed {prune['briefed']}, args shortened {prune['args_shortened']}, "
        f"texts shortened {prune['texts_shortened']}, "
        f"condensed {condense['condensed']}, trimmed {cut['trimmed']}; "
        f"summarizer calls {condense['summarizer_calls']}, "
        f"failures {condense['summarizer_failures']}; "
        f"{seconds * 1000:.0f} ms)"
    )


def _stage_figures(
    report: CompressionReport,
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Each stage's counts, zero for a stage that did not run."""
    prune = report.prune
    condense = report.condense
    cut = report.truncate
    return (
        {
            "briefed": prune.briefed if prune else 0,
            "args_shortened": prune.args_shortened if prune else 0,
            "texts_shortened": prune.texts_shortened if prune else 0,
        },
        {
            "condensed": condense.condensed if condense else 0,
            "summarizer_calls": condense.summarizer_calls if condense else 0,
            "summarizer_failures": condense.summarizer_failures if condense else 0,
        },
        {"trimmed": cut.trimmed if cut else 0},
    )


def report_row(name: str, count: int, report: CompressionReport, seconds: float) -> dict[str, Any]:
    """One file's figures for the ``report`` command (a table row, or JSON).

    Args:
        name: The file as given on the command line (``"-"`` for stdin).
        count: How many messages it has.
        report: What the pipeline did to it.
        seconds: How long that took.

    Returns:
        The figures by key; a stage that did not run shows the tokens before it.
    """
    after_prune = report.prune.tokens_after if report.prune else report.tokens_before
    after_condense = report.condense.tokens_after if report.condense else after_prune
    prune, condense, cut = _stage_figures(report)
    return {
        "file": name,
        "messages": count,
        "tokens_before": report.tokens_before,
        "after_prune": after_prune,
        "after_condense": after_condense,
        "after_truncate": report.truncate.tokens_after if report.truncate else after_condense,
        "tokens_after": report.tokens_after,
        **prune,
        **condense,
        **cut,
        "stages": list(report.stages),
        "ms": round(seconds * 1000, 1),
    }


def total_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sum :func:`report_row` rows (at least one).

    Args:
        rows: The files' rows.

    Returns:
        The sums of their figures; no ``"file"`` nor ``"stages"``.
    """
    total: dict[str, Any] = {}
    for key, first in rows[0].items():
        if isinstance(first, (int, float)) and not isinstance(first, bool):
            value = sum(row[key] for row in rows)
            total[key] = round(value, 1) if isinstance(value, float) else value
    return total


def replay_json(name: str, result: ReplayResult) -> dict[str, Any]:
    """The ``replay`` command's figures as JSON: every turn, and the totals.

    Args:
        name: The file as given on the command line.
        result: The replayed run.

    Returns:
        ``{"file", "turns": [...], "total": {...}}``.
    """
    turns = [{**asdict(turn), "stages": list(turn.stages)} for turn in result.turns]
    return {
        "file": name,
        "turns": turns,
        "total": {
            "model_calls": len(result.turns),
            "tokens_without": result.tokens_without,
            "tokens_with": result.tokens_with,
            "summarizer_calls": result.summarizer_calls,
            "cached_share": round(result.cached_share, 4),
        },
    }


def print_json(value: Any, out: TextIO) -> None:
    """Print ``value`` as indented JSON (ASCII, so any text survives any encoding).

    Args:
        value: What to print.
        out: Where to print.
    """
    json.dump(value, out, indent=2)
    out.write("\n")


def print_replay(result: ReplayResult, out: TextIO) -> None:
    """Print the tokens sent per model call with and without the pipeline, and the totals.

    Args:
        result: The replayed run.
        out: Where to print.
    """
    table = Table(box=None, pad_edge=False)
    for header in ("turn", "without", "with", "cached"):
        table.add_column(header, justify="right")
    table.add_column("stages")
    for turn in result.turns:
        table.add_row(
            str(turn.index),
            f"{turn.tokens_without:,}",
            f"{turn.tokens_with:,}",
            "-" if turn.cached_tokens is None else f"{turn.cached_tokens:,}",
            ",".join(turn.stages) or "-",
        )
    emit(out, table)
    print(
        f"total: {result.tokens_without:,} tokens without, "
        f"{result.tokens_with:,} with the pipeline "
        f"over {len(result.turns)} model calls; summarizer calls {result.summarizer_calls}; "
        f"{result.cached_share:.0%} of the tokens sent repeat the previous request's prefix",
        file=out,
    )


@contextmanager
def progress(err: TextIO, *, lines: bool = True) -> Iterator[Callable[[str, int], None]]:
    """Show progress over steps (files, turns) on ``err``.

    On a terminal this is a live bar; otherwise one line per step, or nothing.

    Args:
        err: Where progress goes (stderr).
        lines: Off a terminal, whether to write a line per step.

    Yields:
        A function to call once each step is done, with its label and the
        number of steps in all.
    """
    if not is_terminal(err):
        done = 0

        def log(label: str, total: int) -> None:
            nonlocal done
            done += 1
            if lines:
                err.write(f"{done}/{total} {label}\n")
                err.flush()

        yield log
        return
    bar = Progress(
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=console_for(err),
    )
    task = bar.add_task("", total=None)
    with bar:
        yield lambda label, total: bar.update(task, total=total, advance=1, description=label)


def emit(
    stream: TextIO, renderable: RenderableType, *, width: int | None = None, crop: bool = False
) -> None:
    """Print with rich; off a terminal, without the spaces rich pads the last column with.

    Args:
        stream: Where to print.
        renderable: A table or text.
        width: Lay it out at this width instead of the console's.
        crop: Whether to cut lines wider than the console (else the terminal wraps them).
    """
    console = console_for(stream)
    if console.is_terminal:
        console.print(renderable, width=width, crop=crop)
        return
    with console.capture() as captured:
        console.print(renderable, width=width, crop=crop)
    stream.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def console_for(stream: TextIO) -> Console:
    """A console on ``stream`` that prints text as given (no markup, no highlighting).

    Its width is the terminal's, or ``COLUMNS`` when set (on a terminal or not);
    off a terminal without ``COLUMNS``, lines are not wrapped.

    Args:
        stream: Where it prints.

    Returns:
        The console.
    """
    terminal = is_terminal(stream)
    columns = os.environ.get("COLUMNS", "")
    sized = terminal or (columns.isdigit() and int(columns) > 0)
    return Console(
        file=stream,
        force_terminal=terminal,
        width=None if sized else _UNWRAPPED,
        highlight=False,
        markup=False,
        emoji=False,
    )
