"""The ``report`` command's table, laid out to stay readable at any width.

Two groups of columns: the tokens left after each stage, and how many messages
each stage changed. Numbers are never cut. File names are shown as the shortest
end of their path that tells them apart, shortened in the middle to the room the
numbers leave. When one table with every column would leave file names less than
:data:`MIN_NAME` characters, the two groups are printed as two tables.

Example:
    >>> display_names(["runs/a/chat.json", "runs/b/chat.json", "notes.json", "-"])
    ['a/chat.json', 'b/chat.json', 'notes.json', '<stdin>']
    >>> shorten("langgraph_customer_support.json", 16)
    'langgra…ort.json'
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from langchain_context_pipeline.cli.render import console_for, emit, escape_controls

__all__ = [
    "CHANGE_COLUMNS",
    "MIN_NAME",
    "TOKEN_COLUMNS",
    "display_names",
    "print_report_table",
    "shorten",
]

TOKEN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("\nmsgs", "messages"),
    ("tokens\nbefore", "tokens_before"),
    ("after\nprune", "after_prune"),
    ("after\ncondense", "after_condense"),
    ("after\ntruncate", "after_truncate"),
)
"""Headers (two lines) and row keys of the token columns: what each stage left."""

CHANGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("results\nbriefed", "briefed"),
    ("args\ncut", "args_shortened"),
    ("texts\ncut", "texts_shortened"),
    ("msgs\ncondensed", "condensed"),
    ("msgs\ndropped", "trimmed"),
    ("time\nms", "ms"),
)
"""Headers and row keys of the columns counting what each stage changed, and the time."""

MIN_NAME = 16
"""The fewest characters of a file name worth one wide table; below, two tables."""

_FORCED_NAME = 10
_UNBOUNDED = 100_000
_FILE_HEADER = "\nfile"
_TOTAL_LABEL = "total"
_STDIN_NAME = "<stdin>"
_ELLIPSIS = "…"
_ASCII_ELLIPSIS = "~"


def display_names(paths: Sequence[str]) -> list[str]:
    """Name each file by the shortest end of its path that no other path ends with.

    Args:
        paths: The files as given (``"-"`` is standard input).

    Returns:
        One printable name per path, in order.
    """
    parts = [(_STDIN_NAME,) if path == "-" else (PurePath(path).parts or (path,)) for path in paths]
    counts: dict[int, Counter[tuple[str, ...]]] = {}
    names = []
    for own in parts:
        depth = 1
        while depth < len(own):
            if depth not in counts:
                counts[depth] = Counter(other[-depth:] for other in parts)
            if counts[depth][own[-depth:]] == 1:
                break
            depth += 1
        names.append(_printable(os.path.join(*own[-depth:])))
    return names


def shorten(name: str, width: int, *, mark: str = _ELLIPSIS) -> str:
    """Fit ``name`` in ``width`` terminal cells by cutting its middle.

    Args:
        name: A file name.
        width: The room, in cells (at least 2).
        mark: One character of one cell that stands for the cut.

    Returns:
        ``name`` when it fits; else its start and end around ``mark``.
    """
    if cell_len(name) <= width:
        return name
    head_room = (width - 1) // 2  # the end (model, extension) tells runs apart more often
    head = _take(name, head_room)
    tail = _take(name[::-1], width - 1 - head_room)[::-1]
    return f"{head}{mark}{tail}"


def print_report_table(
    rows: Sequence[Mapping[str, Any]], total: Mapping[str, Any], out: TextIO
) -> None:
    """Print the files' rows and their total as one table, or two on a narrow width.

    Args:
        rows: :func:`~.render.report_row` rows; their ``"file"`` is the path as given.
        total: :func:`~.render.total_row` of them.
        out: Where to print; its width is the terminal's, or ``COLUMNS``.
    """
    console = console_for(out)
    encoding = console.encoding
    names = [
        _encodable(name, encoding) for name in display_names([str(row["file"]) for row in rows])
    ]
    table = _fitted(console, TOKEN_COLUMNS + CHANGE_COLUMNS, names, rows, total, force=False)
    if table is not None:
        _print_whole(console, out, table)
        return
    for index, columns in enumerate((TOKEN_COLUMNS, CHANGE_COLUMNS)):
        if index:
            out.write("\n")
        fitted = _fitted(console, columns, names, rows, total, force=True)
        assert fitted is not None  # forced
        _print_whole(console, out, fitted)


def _fitted(
    console: Console,
    columns: Sequence[tuple[str, str]],
    names: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    total: Mapping[str, Any],
    *,
    force: bool,
) -> Table | None:
    """The table with names shortened to the room left, or None if that is too little."""
    numbers = _width(console, _table(columns, [""] * len(names), rows, total, ""))
    room = console.width - (numbers - cell_len(_FILE_HEADER.strip()))
    longest = max(cell_len(name) for name in [*names, _TOTAL_LABEL])
    if room < min(longest, MIN_NAME):
        if not force:
            return None
        room = max(room, _FORCED_NAME)
    mark = _ELLIPSIS if _encodable(_ELLIPSIS, console.encoding) == _ELLIPSIS else _ASCII_ELLIPSIS
    labels = [shorten(name, room, mark=mark) for name in names]
    return _table(columns, labels, rows, total, _TOTAL_LABEL)


def _table(
    columns: Sequence[tuple[str, str]],
    labels: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    total: Mapping[str, Any],
    total_label: str,
) -> Table:
    table = Table(box=box.HORIZONTALS, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column(_FILE_HEADER, no_wrap=True)
    for header, _ in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for label, row in zip(labels, rows, strict=True):
        table.add_row(label, *(_cell(row[key]) for _, key in columns))
    if len(rows) > 1:
        table.add_section()
        table.add_row(total_label, *(_cell(total[key]) for _, key in columns))
    return table


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _width(console: Console, table: Table) -> int:
    """The table's natural width, even beyond the console's."""
    return Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum


def _print_whole(console: Console, out: TextIO, table: Table) -> None:
    """Print without squeezing: a table wider than the console is wrapped by the terminal."""
    emit(out, table, width=max(console.width, _width(console, table)))


def _take(text: str, cells: int) -> str:
    """The longest start of ``text`` that fits in ``cells``."""
    taken = 0
    for index, char in enumerate(text):
        taken += cell_len(char)
        if taken > cells:
            return text[:index]
    return text


def _encodable(text: str, encoding: str) -> str:
    """``text`` with what ``encoding`` cannot write (on an ASCII or Latin-1 stdout) as ``?``."""
    try:
        return text.encode(encoding, "replace").decode(encoding)
    except LookupError:  # an encoding Python does not know: leave it to the stream
        return text


def _printable(name: str) -> str:
    """A path from the command line as one line of plain text.

    Undecodable bytes (surrogates) show as ``�``; control characters (a newline
    would wrap the row, ESC would reach the terminal) are escaped.
    """
    try:
        data = name.encode("utf-8", "surrogateescape")  # how Python decoded the argument
    except UnicodeEncodeError:
        data = name.encode("utf-8", "surrogatepass")
    return escape_controls(data.decode("utf-8", "replace"))
