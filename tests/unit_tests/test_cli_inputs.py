"""The command line in-process: stdin, budgets it cannot meet, models it cannot make,
lone surrogates, and replay's progress."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from langchain_context_pipeline.cli import main
from langchain_context_pipeline.cli.transcripts import (
    dump_transcript,
    load_transcript,
    parse_transcript,
)
from tests.support.fakes import EchoSummarizer

ROOT = Path(__file__).parents[2]
PVLIB = ROOT / "examples" / "transcripts" / "minisweagent_pvlib-1707_deepseek.json"
SURROGATES = (
    '[{"role": "system", "content": "be brief \\udfff"},'
    ' {"role": "user", "content": "read \\ud800 and \\ud83d"},'
    ' {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
    ' "function": {"name": "cat", "arguments": "{\\"path\\": \\"\\\\udc00.txt\\"}"}}]},'
    ' {"role": "tool", "tool_call_id": "c1", "content": "x\\udbff"}]'
)


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*argv: str, stdin: bytes = b"", out: Any = None, err: Any = None) -> tuple[int, str, str]:
    out = io.StringIO() if out is None else out
    err = io.StringIO() if err is None else err
    code = main(list(argv), stdout=out, stderr=err, stdin=io.BytesIO(stdin))
    text = out.getvalue() if isinstance(out, io.StringIO) else ""
    return code, text, err.getvalue()


def assert_mistake(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("context-pipeline: error: ")
    for needle in needles:
        assert needle in line, (needle, line)


# --- a budget the transcript cannot meet --------------------------------------------------


@pytest.mark.parametrize("command", ["compress", "report", "replay"])
def test_a_threshold_below_the_system_messages_names_the_file(command: str) -> None:
    code, out, err = run(command, str(PVLIB), "--threshold", "10")
    assert_mistake(code, err, str(PVLIB), "over the budget of 10 tokens")
    assert out == ""


def test_report_names_the_file_whose_budget_fails(tmp_path: Path) -> None:
    small = tmp_path / "small.json"
    small.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    big = tmp_path / "big.json"
    big.write_text(
        json.dumps(
            [{"role": "system", "content": "rule " * 200}, {"role": "user", "content": "x"}]
        ),
        encoding="utf-8",
    )
    code, _, err = run("report", str(small), str(big), "--threshold", "50")
    # the progress line of the file that fitted, then the mistake
    progress, mistake = err.strip().splitlines()
    assert progress == "1/2 small.json"
    assert_mistake(code, mistake, str(big), "over the budget of 50 tokens")


# --- standard input ---------------------------------------------------------------------


def test_report_and_replay_read_stdin() -> None:
    data = PVLIB.read_bytes()
    code, out, _ = run("report", "-", "--json", stdin=data)
    assert code == 0
    assert json.loads(out)["files"][0]["file"] == "-"
    code, out, _ = run("report", "-", stdin=data)
    assert code == 0
    assert out.splitlines()[4].startswith("<stdin> ")
    code, out, _ = run("replay", "-", "--json", stdin=data)
    assert code == 0
    assert json.loads(out)["file"] == "-" and json.loads(out)["turns"]


def test_stdin_given_twice() -> None:
    assert_mistake(*run("report", "-", "-", stdin=PVLIB.read_bytes())[::2], "once")


def test_bad_json_on_stdin() -> None:
    code, _, err = run("replay", "-", stdin=b'[{"role": "user",\n "content": ]')
    assert_mistake(code, err, "<stdin>", "line 2")


def test_empty_stdin() -> None:
    assert_mistake(*run("compress", "-")[::2], "<stdin>", "empty")


# --- lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fmt", ["openai", "openai_jsonl", "messages_object", "langchain_dict", "langchain_dumpd"]
)
def test_lone_surrogates_round_trip_through_compress(tmp_path: Path, fmt: str) -> None:
    original, _ = parse_transcript(SURROGATES)
    source = tmp_path / "in.json"
    text = dump_transcript(original, fmt)  # type: ignore[arg-type]
    source.write_bytes(text.encode("utf-8"))  # raised UnicodeEncodeError: raw surrogates
    # stdout as a real one is: strict UTF-8 (it raised UnicodeEncodeError)
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    code, _, err = run("compress", str(source), out=stdout)
    assert code == 0, err
    stdout.flush()
    written = stdout.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    back, found = parse_transcript(written)
    assert found == fmt
    assert [m.content for m in back] == [m.content for m in original]
    assert (
        back[2].tool_calls
        == original[2].tool_calls
        == [{"name": "cat", "args": {"path": "\udc00.txt"}, "id": "c1", "type": "tool_call"}]
    )
    target = tmp_path / "out.json"
    assert run("compress", str(source), "-o", str(target))[0] == 0
    assert [m.content for m in load_transcript(target)[0]] == [m.content for m in original]


# --- summarizer models ------------------------------------------------------------------------


class ProviderError(Exception):
    """What a provider's client raises on a missing credential (its own class)."""


ProviderError.__module__ = "someprovider._exceptions"


def test_a_provider_error_while_making_the_model_is_a_mistake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(name: str) -> Any:
        raise ProviderError("Missing credentials.\nSet SOMEPROVIDER_API_KEY.")

    monkeypatch.setattr("langchain.chat_models.init_chat_model", refuse)
    code, _, err = run("compress", str(PVLIB), "--model", "someprovider:m")
    assert_mistake(code, err, "--model someprovider:m: cannot make the model: Missing credentials")


@pytest.mark.parametrize("error", [ImportError("no langchain_x"), ValueError("unknown provider")])
def test_setup_errors_while_making_the_model_are_mistakes(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def refuse(name: str) -> Any:
        raise error

    monkeypatch.setattr("langchain.chat_models.init_chat_model", refuse)
    assert_mistake(*run("report", str(PVLIB), "--model", "x:y")[::2], str(error))


def test_a_bug_while_making_the_model_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> Any:
        raise AttributeError("'NoneType' object has no attribute 'client'")

    monkeypatch.setattr("langchain.chat_models.init_chat_model", broken)
    with pytest.raises(AttributeError):
        run("compress", str(PVLIB), "--model", "openai:gpt-4o-mini")


# --- replay's progress ---------------------------------------------------------------------


def test_replay_with_a_model_shows_each_turn_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("langchain.chat_models.init_chat_model", lambda name: EchoSummarizer())
    code, out, err = run("replay", str(PVLIB), "--threshold", "16000", "--model", "fake:echo")
    assert code == 0, err
    turns = out.strip().splitlines()[1:-1]
    lines = err.splitlines()
    assert len(lines) == len(turns) > 10
    assert lines[0].startswith(f"1/{len(turns)} turn at message {turns[0].split()[0]}: ")
    assert lines[-1].startswith(f"{len(turns)}/{len(turns)} turn at message ")


def test_replay_with_the_digest_is_quiet_off_a_terminal() -> None:
    code, out, err = run("replay", str(PVLIB), "--threshold", "16000")
    assert code == 0 and err == "" and out.startswith("turn ")


def test_replay_draws_a_bar_on_a_terminal() -> None:
    err = Terminal()
    code, out, _ = run("replay", str(PVLIB), "--threshold", "16000", err=err)
    assert code == 0
    assert "\x1b[" in err.getvalue() and "turn at message" in err.getvalue()
    assert "\x1b[" not in out
