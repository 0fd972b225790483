"""What the command line prints: the report table, the replay table, progress.

Tables are drawn by ``rich``. On a terminal they fit its width and progress is a
live bar on stderr; written to a file or a pipe, nothing is coloured or wrapped
and progress is one plain line per file, so logs and tests read it as text.

Example:
    >>> import io
    >>> out = io.StringIO()
    >>> print_table(["file", "tokens"], [["a.json", 1200], ["TOTAL", 1200]], out)
    >>> print(out.getvalue(), end="")
    file     tokens
    ───────────────
    a.json    1,200
    ───────────────
    TOTAL     1,200
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from langchain_context_pipeline.replay import ReplayResult
from langchain_context_pipeline.report import CompressionReport

__all__ = [
    "REPORT_COLUMNS",
    "is_terminal",
    "print_replay",
    "print_table",
    "progress",
    "report_line",
    "report_row",
    "total_row",
]

REPORT_COLUMNS = (
    ("file", "file"),
    ("msgs", "messages"),
    ("before", "tokens_before"),
    ("pruned", "after_prune"),
    ("condensed", "after_condense"),
    ("truncated", "after_truncate"),
    ("briefs", "briefed"),
    ("args", "args_shortened"),
    ("texts", "texts_shortened"),
    ("cond.", "condensed"),
    ("trimmed", "trimmed"),
    ("ms", "ms"),
)
"""The ``report`` table's columns: header, and key of :func:`report_row`."""

# Off a terminal there is no width to fit: lines are never wrapped.
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
        name: The file's name.
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
    """Sum :func:`report_row` rows (at least one) into a ``TOTAL`` row.

    Args:
        rows: The files' rows.

    Returns:
        The sums, with ``"file": "TOTAL"`` and no stages.
    """
    total: dict[str, Any] = {"file": "TOTAL", "stages": []}
    for key in rows[0]:
        if key not in total:
            value = sum(row[key] for row in rows)
            total[key] = round(value, 1) if key == "ms" else value
    return total


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """Print a table; its last row is set apart as the total.

    The first column is left-aligned, the others (numbers, with thousands
    separators) right-aligned.

    Args:
        headers: The column headers.
        rows: The rows, the total last.
        out: Where to print.
    """
    table = Table(box=box.HORIZONTALS, show_edge=False, pad_edge=False)
    # On a narrow terminal the names fold onto more lines; numbers and headers are never
    # folded nor cropped (crop=False below): the terminal wraps what is still too wide.
    longest = max(len(str(cell)) for cell in [headers[0], *(row[0] for row in rows)])
    table.add_column(headers[0], overflow="fold", min_width=min(12, longest))
    for header in headers[1:]:
        table.add_column(header, justify="right", no_wrap=True)
    for index, row in enumerate(rows):
        if index == len(rows) - 1 and index > 0:
            table.add_section()
        table.add_row(*(f"{cell:,}" if isinstance(cell, int) else str(cell) for cell in row))
    _print(out, table, crop=False)


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
    _print(out, table)
    print(
        f"total: {result.tokens_without:,} tokens without, "
        f"{result.tokens_with:,} with the pipeline "
        f"over {len(result.turns)} model calls; summarizer calls {result.summarizer_calls}; "
        f"{result.cached_share:.0%} of the tokens sent repeat the previous request's prefix",
        file=out,
    )


@contextmanager
def progress(total: int, err: TextIO) -> Iterator[Callable[[str], None]]:
    """Show progress over ``total`` files on ``err``.

    On a terminal this is a live bar; otherwise one line per finished file.

    Args:
        total: How many files there are.
        err: Where progress goes (stderr).

    Yields:
        A function to call with each file's name once it is done.
    """
    if not is_terminal(err):
        done = 0

        def log(name: str) -> None:
            nonlocal done
            done += 1
            err.write(f"{done}/{total} {Path(name).name}\n")
            err.flush()

        yield log
        return
    bar = Progress(
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=_console(err),
    )
    task = bar.add_task("", total=total)
    with bar:
        yield lambda name: bar.update(task, advance=1, description=Path(name).name)


def _print(stream: TextIO, table: Table, *, crop: bool = True) -> None:
    """Print a table; off a terminal without the spaces rich pads the last column with."""
    console = _console(stream)
    if console.is_terminal:
        console.print(table, crop=crop)
        return
    with console.capture() as captured:
        console.print(table, crop=crop)
    stream.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _console(stream: TextIO) -> Console:
    """A console on ``stream`` that prints text as given (no markup, no highlighting)."""
    terminal = is_terminal(stream)
    return Console(
        file=stream,
        force_terminal=terminal,
        width=None if terminal else _UNWRAPPED,
        highlight=False,
        markup=False,
        emoji=False,
    )
