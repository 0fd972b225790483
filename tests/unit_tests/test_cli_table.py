"""The report table's layout: at any width from 80 columns, for any file names and
realistic figures, lines fit, numbers are whole and every file keeps one line."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from langchain_context_pipeline.cli.render import total_row
from langchain_context_pipeline.cli.table import (
    CHANGE_COLUMNS,
    MIN_NAME,
    TOKEN_COLUMNS,
    display_names,
    print_report_table,
    shorten,
)

NUMBER = re.compile(r"\d{1,3}(,\d{3})*(\.\d)?")
# Path characters without spaces (a label is one word of its line), wide ones included.
NAME_CHARS = st.sampled_from("abcxyz_-.0123456789/éß漢字")
COUNTS = ("messages", "briefed", "args_shortened", "texts_shortened", "condensed", "trimmed")
TOKENS = ("tokens_before", "after_prune", "after_condense", "after_truncate", "tokens_after")


@st.composite
def report_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows with up to 10M tokens and 100k messages a file (a day of a busy agent)."""
    names = draw(st.lists(st.text(NAME_CHARS, min_size=1, max_size=70), min_size=1, max_size=6))
    rows = []
    for name in names:
        row: dict[str, Any] = {"file": name}
        row.update({key: draw(st.integers(0, 100_000)) for key in COUNTS})
        row.update({key: draw(st.integers(0, 10_000_000)) for key in TOKENS})
        row["ms"] = draw(st.floats(0, 99_999, allow_nan=False).map(lambda v: round(v, 1)))
        row["stages"] = ["prune"]
        rows.append(row)
    return rows


def blocks(text: str) -> list[list[str]]:
    """Each table's file rows: from the rule under its header to the next rule or blank line."""
    found: list[list[str]] = []
    rows: list[str] | None = None
    for line in [*text.splitlines(), ""]:
        if rows is None:
            if line.startswith("─"):
                rows = []
        elif line.startswith("─") or not line:
            found.append(rows)
            rows = None
        else:
            rows.append(line)
    return found


def cell(value: Any) -> str:
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


@given(report_rows(), st.integers(80, 220))
def test_the_table_fits_the_width_with_whole_numbers(
    rows: list[dict[str, Any]], width: int
) -> None:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        print_report_table(rows, total_row(rows), out)
    text = out.getvalue()
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    names = display_names([row["file"] for row in rows])
    tables = blocks(text)
    assert len(tables) in (1, 2)
    columns = TOKEN_COLUMNS + CHANGE_COLUMNS if len(tables) == 1 else None
    for index, table in enumerate(tables):
        keys = [key for _, key in (columns or (TOKEN_COLUMNS, CHANGE_COLUMNS)[index])]
        assert len(table) == len(rows), text  # one line per file
        for line, row, name in zip(table, rows, names, strict=True):
            label, *cells = line.split()
            assert cells == [cell(row[key]) for key in keys], line
            assert all(NUMBER.fullmatch(value) for value in cells)
            # a wide character that does not fit may leave a cell at each end of the cut
            assert label == name or (cell_len(label) >= min(MIN_NAME, cell_len(name)) - 2 > 0)
            head, _, tail = label.partition("…")
            assert name.startswith(head) and name.endswith(tail)


@given(st.text(min_size=1, max_size=80), st.integers(2, 60))
def test_shorten_keeps_both_ends_within_the_width(name: str, width: int) -> None:
    short = shorten(name, width)
    assert cell_len(short) <= max(width, cell_len(name) if short == name else width)
    if short != name:
        head, ellipsis, tail = short.partition("…")
        assert ellipsis and name.startswith(head) and name.endswith(tail)
        assert cell_len(short) >= width - 2  # a wide character may leave a cell at each end


def test_display_names_tell_files_apart() -> None:
    assert display_names(["a/x/chat.json", "b/x/chat.json", "c/y.json"]) == [
        "a/x/chat.json",
        "b/x/chat.json",
        "y.json",
    ]
    assert display_names(["same.json", "same.json"]) == ["same.json", "same.json"]
    assert display_names(["-", "/abs/run.json"]) == ["<stdin>", "run.json"]
    assert display_names(["bad\udcff.json"]) == ["bad\ufffd.json"]  # undecodable byte


def test_control_characters_in_names_are_escaped_and_rows_stay_one_line() -> None:
    """A newline would wrap a row, ESC would reach the terminal: both are shown escaped."""
    names = ["new\nline.json", "esc\x1b[31mred.json", "tab\there.json", "cr\rback.json"]
    assert display_names(names) == [
        "new\\nline.json",
        "esc\\x1b[31mred.json",
        "tab\\there.json",
        "cr\\rback.json",
    ]
    rows = [
        {"file": name, "stages": [], "ms": 1.0, **dict.fromkeys(COUNTS + TOKENS, 7)}
        for name in names
    ]
    out = io.StringIO()
    print_report_table(rows, total_row(rows), out)
    text = out.getvalue()
    assert not any(ord(c) < 32 and c != "\n" for c in text), repr(text)
    for block in blocks(text):
        assert len(block) == len(names), text  # one line per file
