"""The installed ``context-pipeline`` console script, run as a user runs it: in a subprocess.

Off a terminal its tables follow ``COLUMNS``; its mistakes are one line on stderr
and exit code 2; its output is UTF-8 whatever the transcript holds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from langchain_context_pipeline import __version__
from langchain_context_pipeline.cli.transcripts import parse_transcript
from langchain_context_pipeline.stages.settings import PipelineSettings
from langchain_context_pipeline.tokens.counters import estimate_tokens

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples" / "transcripts"
DATA = ROOT / "tests" / "data" / "transcripts"
PVLIB = "examples/transcripts/minisweagent_pvlib-1707_deepseek.json"
SCRIPT = Path(sysconfig.get_path("scripts")) / "context-pipeline"
# The script when installed (pip install -e .), else the same entry point through -m.
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "langchain_context_pipeline"]
NUMBER = re.compile(r"\d{1,3}(,\d{3})*(\.\d)?")


def console(
    *argv: str,
    columns: int | None = None,
    stdin: bytes = b"",
    unset: tuple[str, ...] = (),
    command: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run the console script from the repository root; outputs as bytes."""
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env.update(extra_env or {})
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    # The code under test (this checkout) before whatever the script was installed from.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [*(command or COMMAND), *argv],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=120,
    )


def assert_one_line_mistake(done: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("context-pipeline: error: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# --- the report table at 80 and 120 columns ----------------------------------------------

# Three examples, two more files, one of them with the same name as an example: each is
# shown by the shortest end of its path that tells it apart.
TABLE_FILES = {
    "examples/transcripts/langgraph_customer_support_swiss_airlines.json": (
        "langgraph_customer_support_swiss_airlines.json"
    ),
    PVLIB: "examples/transcripts/minisweagent_pvlib-1707_deepseek.json",
    "examples/transcripts/openhands_swebv_astropy-14598_claude35.json": (
        "openhands_swebv_astropy-14598_claude35.json"
    ),
    "tests/data/transcripts/minisweagent_pvlib-1707_deepseek.json": (
        "data/transcripts/minisweagent_pvlib-1707_deepseek.json"
    ),
    "tests/data/transcripts/aider_afi-core_gpt4o.json": "aider_afi-core_gpt4o.json",
}
TOKEN_KEYS = ("messages", "tokens_before", "after_prune", "after_condense", "after_truncate")
CHANGE_KEYS = ("briefed", "args_shortened", "texts_shortened", "condensed", "trimmed")


def shows(label: str, name: str) -> bool:
    """Whether a table label is ``name``, or ``name`` cut in its middle to 16+ characters."""
    if label == name:
        return True
    head, ellipsis, tail = label.partition("…")
    return (
        bool(ellipsis)
        and len(label) >= 16
        and len(head) >= 6
        and len(tail) >= 6
        and name.startswith(head)
        and name.endswith(tail)
    )


def table_blocks(text: str) -> list[list[str]]:
    """The data rows of each table printed: the lines between a table's two rules."""
    blocks: list[list[str]] = []
    rows: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("─"):
            if rows is None:
                rows = []
            else:
                blocks.append(rows)
                rows = None
        elif rows is not None:
            rows.append(line)
    return blocks


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    done = console("report", *TABLE_FILES, "--json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.mark.parametrize("columns", [80, 120])
def test_report_table_fits_and_shows_names_and_whole_numbers(
    columns: int, figures: dict[str, Any]
) -> None:
    done = console("report", *TABLE_FILES, columns=columns)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8")
    assert all(len(line) <= columns for line in text.splitlines()), text
    blocks = table_blocks(text)
    # one table when the names keep 16+ characters beside every column, else two
    assert len(blocks) == (1 if columns == 120 else 2), text
    shown_keys = [*TOKEN_KEYS, *CHANGE_KEYS]
    for block in blocks:
        # one line per file: no name wraps onto more lines
        assert len(block) == len(TABLE_FILES), text
        for line, (path, name), row in zip(
            block, TABLE_FILES.items(), figures["files"], strict=True
        ):
            label, *cells = line.split()
            assert row["file"] == path
            assert shows(label, name), (label, name)
            assert all(NUMBER.fullmatch(cell) for cell in cells), line  # no "20,3…"
            wanted = [f"{row[key]:,}" for key in shown_keys]
            assert all(cell in wanted for cell in cells[:-1]), (cells, wanted)
            if block is blocks[0]:
                assert cells[:5] == wanted[:5]  # msgs and the four token columns, whole
    assert f"{figures['total']['tokens_before']:,}" in text
    assert f"{figures['total']['after_truncate']:,}" in text


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_the_table_on_a_stdout_that_is_not_utf8(tmp_path: Path, encoding: str) -> None:
    """A cut name's mark and a name's letters the encoding lacks print, no UnicodeEncodeError."""
    text = (ROOT / PVLIB).read_text(encoding="utf-8")
    names = ["café_" + "long_" * 12 + "run.json", "日本語_" + "x" * 60 + ".json", "plain.json"]
    for name in names:
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = console(
        "report",
        *(str(tmp_path / name) for name in names),
        columns=80,
        extra_env={"PYTHONIOENCODING": encoding},
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    out = done.stdout.decode(encoding)  # strict: written in the stream's own encoding
    labels = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert any(label.startswith("caf") and "~" in label for label in labels), out
    assert any(label.startswith("???_") for label in labels), out  # no Japanese in either
    assert any(label == "plain.json" for label in labels), out
    one = json.loads(console("report", PVLIB, "--json").stdout)["total"]["tokens_before"]
    assert f"{3 * one:,}" in out  # the three copies' total, whole


# --- every mistake: one line, exit 2 ------------------------------------------------------


def test_a_threshold_below_the_system_messages_is_a_one_line_mistake() -> None:
    done = console("report", PVLIB, "--threshold", "10")
    assert_one_line_mistake(done, PVLIB, "budget of 10 tokens", "threshold")


def test_a_model_without_its_key_is_a_one_line_mistake() -> None:
    done = console("compress", PVLIB, "--model", "openai:gpt-4o-mini", unset=("OPENAI_API_KEY",))
    assert_one_line_mistake(done, "--model openai:gpt-4o-mini", "cannot make the model")


def without_langchain(argv: list[str]) -> list[str]:
    """A Python that runs the command line as installed with only the ``openai`` extra."""
    code = (
        "import sys\n"
        "sys.modules['langchain'] = None  # not installed\n"
        "from langchain_context_pipeline.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return [sys.executable, "-c", code]


def test_an_openai_model_without_langchain_names_the_openai_extra() -> None:
    argv = ["compress", PVLIB, "--model", "openai:gpt-4o-mini"]
    done = console(command=without_langchain(argv))
    assert_one_line_mistake(done, "langchain-context-pipeline[openai]")
    assert b"[agents]" not in done.stderr


def test_another_provider_without_langchain_names_langchain() -> None:
    argv = ["compress", PVLIB, "--model", "anthropic:claude-haiku-4-5"]
    done = console(command=without_langchain(argv))
    assert_one_line_mistake(done, "pip install langchain and the provider's package")


def test_stdin_that_is_not_utf8_is_a_one_line_mistake() -> None:
    done = console("compress", "-", stdin=b'[{"role": "user", "content": "\xff"}]')
    assert_one_line_mistake(done, "<stdin>", "UTF-8")


# --- stdin, --version, --help ---------------------------------------------------------------


def test_compress_reads_stdin_as_it_reads_the_file() -> None:
    from_file = console("compress", PVLIB, "--threshold", "8000")
    from_stdin = console("compress", "-", "--threshold", "8000", stdin=(ROOT / PVLIB).read_bytes())
    assert from_file.returncode == from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout
    tokens = estimate_tokens(parse_transcript((ROOT / PVLIB).read_text(encoding="utf-8"))[0])
    assert from_stdin.stderr.decode().startswith(f"<stdin>: {tokens:,} -> ")


def test_version() -> None:
    done = console("--version")
    assert done.returncode == 0
    assert done.stdout.decode() == f"context-pipeline {__version__}\n"


def test_help_shows_the_default_threshold() -> None:
    done = console("report", "--help", columns=100)
    assert done.returncode == 0
    text = " ".join(done.stdout.decode().split())
    assert f"token budget (default: {PipelineSettings().threshold:,})" in text
    assert f"(default: {PipelineSettings().head_count})" in text


# --- --json on every command ---------------------------------------------------------------


def test_report_json_shape(figures: dict[str, Any]) -> None:
    assert set(figures) == {"threshold", "tail_budget", "summarizer", "files", "total"}
    assert [row["file"] for row in figures["files"]] == list(TABLE_FILES)  # as given
    total = figures["total"]
    assert "file" not in total and "stages" not in total
    for key in (*TOKEN_KEYS, *CHANGE_KEYS, "tokens_after"):
        assert total[key] == sum(row[key] for row in figures["files"]), key


def test_compress_json_report_goes_to_stderr() -> None:
    done = console("compress", PVLIB, "--threshold", "8000", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stderr)
    (row,) = report["files"]
    tokens = estimate_tokens(parse_transcript((ROOT / PVLIB).read_text(encoding="utf-8"))[0])
    assert row["file"] == PVLIB and row["tokens_before"] == tokens
    assert report["threshold"] == 8000 and report["total"]["tokens_after"] == row["tokens_after"]
    messages, fmt = parse_transcript(done.stdout)  # stdout is still the transcript
    assert fmt == "openai" and len(messages) < 191


def test_replay_json_shape() -> None:
    done = console("replay", PVLIB, "--threshold", "16000", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""  # no progress lines without a summarizer model
    data = json.loads(done.stdout)
    assert data["file"] == PVLIB and data["threshold"] == 16_000
    turns = data["turns"]
    assert turns and set(turns[0]) == {
        "index",
        "tokens_without",
        "tokens_with",
        "stages",
        "summarizer_calls",
        "cached_tokens",
    }
    assert max(turn["tokens_with"] for turn in turns) <= 16_000
    total = data["total"]
    assert total["model_calls"] == len(turns)
    assert total["tokens_with"] == sum(turn["tokens_with"] for turn in turns)


# --- lone surrogates: valid JSON in, valid UTF-8 JSON out ---------------------------------

SURROGATES = (
    '[{"role": "system", "content": "be brief \\udfff"},'
    ' {"role": "user", "content": "read \\ud800 and \\ud83d"},'
    ' {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
    ' "function": {"name": "cat", "arguments": "{\\"path\\": \\"\\\\udc00.txt\\"}"}}]},'
    ' {"role": "tool", "tool_call_id": "c1", "content": "x\\udbff"}]'
)


def test_compress_writes_lone_surrogates_back_escaped(tmp_path: Path) -> None:
    original, _ = parse_transcript(SURROGATES)
    assert "\ud800" in str(original[1].content)
    assert original[2].tool_calls[0]["args"] == {"path": "\udc00.txt"}
    source = tmp_path / "in.json"
    source.write_text(SURROGATES, encoding="utf-8")
    done = console("compress", str(source))
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    out = done.stdout.decode("utf-8")  # strict: valid UTF-8
    assert "\\ud800" in out
    back, found = parse_transcript(out)
    assert found == "openai"
    assert [m.content for m in back] == [m.content for m in original]
    assert back[2].tool_calls == original[2].tool_calls


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "argv", [["report", PVLIB], ["report", PVLIB, "--json"], ["compress", PVLIB]]
)
def test_a_full_disk_on_stdout_is_a_one_line_mistake(argv: list[str]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*COMMAND, *argv], stdout=full, stderr=subprocess.PIPE, cwd=ROOT, env=env, timeout=120
        )
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.splitlines()[-1] == (
        "context-pipeline: error: cannot write the output: No space left on device"
    )


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [*COMMAND, "replay", PVLIB],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the table is written, as `| true` does
    err = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert b"Traceback" not in err and b"Exception ignored" not in err
