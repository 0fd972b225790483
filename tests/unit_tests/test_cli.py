from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import messages_to_dict

from langchain_context_pipeline.cli import main
from langchain_context_pipeline.cli.transcripts import (
    dump_transcript,
    load_transcript,
    parse_transcript,
)
from langchain_context_pipeline.tokens.counters import estimate_tokens

DATA = Path(__file__).parents[1] / "data" / "transcripts"
PVLIB = DATA / "minisweagent_pvlib-1707_deepseek.json"


def pvlib_tokens() -> int:
    """The transcript's size by the default estimate, as the CLI must report it."""
    return estimate_tokens(load_transcript(PVLIB)[0])


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    # COLUMNS sets the width of the tables even off a terminal; these tests read them unwrapped.
    monkeypatch.delenv("COLUMNS", raising=False)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_compress_to_stdout_keeps_the_format_and_the_budget() -> None:
    code, out, err = run("compress", str(PVLIB), "--threshold", "8000")
    assert code == 0
    messages = json.loads(out)
    assert messages[0]["role"] == "system"
    assert f"{PVLIB}: {pvlib_tokens():,} -> " in err and "stages: prune, condense" in err
    loaded, fmt = load_transcript(PVLIB)
    compressed, fmt_out = parse_transcript(out)
    assert fmt_out == fmt == "openai"
    assert estimate_tokens(compressed) <= 8000 < estimate_tokens(loaded)


@pytest.mark.parametrize(
    "fmt", ["openai_jsonl", "langchain_dict", "langchain_dumpd", "messages_object"]
)
def test_compress_writes_the_same_format_to_a_file(tmp_path: Path, fmt: str) -> None:
    messages, _ = load_transcript(PVLIB)
    source = tmp_path / f"in.{fmt}"
    source.write_text(dump_transcript(messages, fmt), encoding="utf-8")  # type: ignore[arg-type]
    target = tmp_path / "out.txt"
    code, out, _ = run(
        "compress", str(source), "-o", str(target), "--threshold", "9000", "--tail-budget", "2000"
    )
    assert code == 0 and out == ""
    compressed, found = load_transcript(target)
    assert found == fmt
    assert estimate_tokens(compressed) <= 9000


def test_report_table_and_total() -> None:
    files = sorted(str(p) for p in DATA.glob("*.json"))[:3]
    code, out, err = run("report", *files, "--threshold", "16000")
    assert code == 0
    lines = out.splitlines()
    # token columns ("tokens before", "after prune"...) and message counts ("msgs condensed")
    # have distinct two-line headers
    assert lines[1].split() == [
        "tokens", "after", "after", "after", "results", "args", "texts", "msgs", "msgs", "time",
    ]  # fmt: skip
    assert lines[2].split() == [
        "file", "msgs", "before", "prune", "condense", "truncate",
        "briefed", "cut", "cut", "condensed", "dropped", "ms",
    ]  # fmt: skip
    assert lines[-2].split()[0] == "total"
    assert err.count("/3") >= 3  # the progress bar reached every file
    assert out.strip().splitlines()[-1].startswith("saved ")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_report_progress_bar_on_a_terminal() -> None:
    files = sorted(str(p) for p in DATA.glob("*.json"))[:2]
    out, err = io.StringIO(), Terminal()
    assert main(["report", *files, "--threshold", "16000"], stdout=out, stderr=err) == 0
    assert "2/2" in err.getvalue() and "\x1b[" in err.getvalue()  # drawn live, by rich
    assert "\x1b[" not in out.getvalue()  # stdout is not a terminal: plain text
    assert out.getvalue().splitlines()[-2].startswith("total ")


def test_report_prints_the_tail_the_library_chose() -> None:
    # regression: the command line computed threshold // 4 (16,000) itself, while
    # ContextPipeline defaults to min(8000, threshold // 4)
    code, out, _ = run("report", str(PVLIB), "--threshold", "64000")
    assert code == 0
    assert out.splitlines()[0].startswith("threshold 64,000 tokens, tail 8,000,")


def test_report_passes_a_given_tail_budget() -> None:
    code, out, _ = run("report", str(PVLIB), "--threshold", "64000", "--tail-budget", "16000")
    assert code == 0
    assert out.splitlines()[0].startswith("threshold 64,000 tokens, tail 16,000,")


def test_report_json() -> None:
    code, out, _ = run("report", str(PVLIB), "--threshold", "16000", "--json")
    assert code == 0
    data = json.loads(out)
    (row,) = data["files"]
    assert row["file"] == str(PVLIB)  # the path as given, not its basename
    assert row["tokens_before"] == pvlib_tokens() and row["after_prune"] < row["tokens_before"]
    assert data["total"]["tokens_before"] == pvlib_tokens()
    assert "file" not in data["total"] and "stages" not in data["total"]
    assert (data["threshold"], data["tail_budget"], data["summarizer"]) == (16_000, 4000, "digest")


def test_replay_with_plot(tmp_path: Path) -> None:
    plot = tmp_path / "tokens.png"
    code, out, _ = run("replay", str(PVLIB), "--threshold", "16000", "--plot", str(plot))
    assert code == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = out.strip().splitlines()
    assert lines[0].split() == ["turn", "without", "with", "cached", "stages"]
    assert lines[-1].startswith("total: ")
    assert "of the tokens sent repeat the previous request's prefix" in lines[-1]
    cached = [line.split()[3] for line in lines[1:-1]]
    assert cached[0] == "-" and all(c != "-" for c in cached[1:])
    with_values = [int(line.split()[2].replace(",", "")) for line in lines[1:-1]]
    assert max(with_values) <= 16_000


def test_module_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "langchain_context_pipeline", "report", str(PVLIB), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["messages"] == 191


def assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("context-pipeline: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert_user_error(*run("compress", str(missing))[::2], "missing.json", "cannot read")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert_user_error(*run("report", str(tmp_path))[::2], str(tmp_path))


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "content": "hi"},\n {"role": ]', encoding="utf-8")
    assert_user_error(*run("compress", str(bad))[::2], "bad.json", "line 2")


def test_unknown_format(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"conversation": []}', encoding="utf-8")
    assert_user_error(*run("compress", str(odd))[::2], "odd.json")


def test_wrong_shape_names_the_message(tmp_path: Path) -> None:
    odd = tmp_path / "shape.json"
    odd.write_text('[{"role": "user", "content": "a"}, 5]', encoding="utf-8")
    assert_user_error(*run("report", str(odd))[::2], "shape.json", "message 1")


def test_unknown_role(tmp_path: Path) -> None:
    odd = tmp_path / "role.json"
    odd.write_text('[{"role": "wizard", "content": "a"}]', encoding="utf-8")
    assert_user_error(*run("compress", str(odd))[::2], "role.json", "message 0")


def test_not_utf8(tmp_path: Path) -> None:
    odd = tmp_path / "latin.json"
    odd.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    assert_user_error(*run("compress", str(odd))[::2], "latin.json")


def test_langchain_dict_with_bad_type(tmp_path: Path) -> None:
    odd = tmp_path / "lc.json"
    data = messages_to_dict([])
    data.append({"type": "alien", "data": {"content": "x"}})
    odd.write_text(json.dumps(data), encoding="utf-8")
    assert_user_error(*run("compress", str(odd))[::2], "lc.json", "message 0")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compress", str(PVLIB), "--threshold", "abc"], "--threshold"),
        (["compress", str(PVLIB), "--threshold", "0"], "positive"),
        (["compress", str(PVLIB), "--head-count", "-1"], "--head-count"),
        (["compress", str(PVLIB), "--threshold", "1000", "--tail-budget", "1000"], "tail_budget"),
        (["compress", str(PVLIB), "--model", "gpt4"], "PROVIDER:NAME"),
        (["compress", str(PVLIB), "--base-url", "http://127.0.0.1:1/v1"], "go together"),
        (
            [
                "compress",
                str(PVLIB),
                "--model",
                "openai:x",
                "--base-url",
                "http://h/v1",
                "--model-name",
                "m",
            ],
            "either",
        ),
        (["compress", str(PVLIB), "--model", "nosuchprovider:model"], "nosuchprovider"),
        (["frobnicate"], "invalid choice"),
        (["compress"], "required"),
        ([], "required"),
    ],
)
def test_bad_options(argv: list[str], needle: str) -> None:
    assert_user_error(*run(*argv)[::2], needle)


def test_unwritable_output(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.json"
    assert_user_error(*run("compress", str(PVLIB), "-o", str(target))[::2], "cannot write")


def test_unwritable_plot(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "plot.png"
    assert_user_error(*run("replay", str(PVLIB), "--plot", str(target))[::2], "cannot write")


def _is_type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def test_core_modules_do_not_import_the_cli() -> None:
    package = Path(__file__).parents[2] / "langchain_context_pipeline"
    core = [
        path
        for path in package.rglob("*.py")
        if path.name != "__main__.py" and "cli" not in path.relative_to(package).parts
    ]
    assert len(core) > 40
    for path in core:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.parent == package and path.name == "__init__.py":
            # load_transcript is imported on first use; the static import is for type checkers
            assert any(_is_type_checking_block(node) for node in tree.body)
            tree.body = [node for node in tree.body if not _is_type_checking_block(node)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("langchain_context_pipeline.cli") for n in names), path.name


def test_load_transcript_at_top_level_loads_the_cli_only_when_used() -> None:
    code = (
        "import sys, langchain_context_pipeline as package\n"
        "assert 'langchain_context_pipeline.cli' not in sys.modules\n"
        "assert 'load_transcript' in dir(package) and 'load_transcript' in package.__all__\n"
        "from langchain_context_pipeline import load_transcript\n"
        "from langchain_context_pipeline.cli.transcripts import load_transcript as original\n"
        "assert load_transcript is original\n"
        f"print(len(load_transcript({str(PVLIB)!r})[0]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "191"


def test_a_control_character_in_a_file_name_does_not_reach_the_terminal(tmp_path: Path) -> None:
    missing = tmp_path / "no\x1b[2Jfile.json"
    code, _, err = run("report", str(missing))
    assert_user_error(code, err, "no\\x1b[2Jfile.json", "cannot read")
    assert "\x1b" not in err


def test_compress_names_a_file_with_a_control_character_escaped(tmp_path: Path) -> None:
    source = tmp_path / "run\x1b[2J.json"
    source.write_text(PVLIB.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = run("compress", str(source), "-o", str(tmp_path / "out.json"))
    assert code == 0, err
    assert "run\\x1b[2J.json: " in err and "\x1b" not in err
