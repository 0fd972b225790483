from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from langchain_context_pipeline import brief_for


@pytest.mark.parametrize(
    ("name", "args", "output", "expected"),
    [
        (
            "read_file",
            {"path": "src/app.py"},
            "x" * 45_210,
            "[read_file] src/app.py (45,210 chars)",
        ),
        ("view", {"file_path": "a/b.py"}, "y" * 10, "[view] a/b.py (10 chars)"),
        ("open", {"filename": "notes.md"}, "", "[open] notes.md (0 chars)"),
        ("read_file", {"file": "c.txt"}, "zz", "[read_file] c.txt (2 chars)"),
        (
            "search",
            {"query": "token limit"},
            "r" * 12_400,
            '[search] "token limit" (12,400 chars result)',
        ),
        (
            "grep",
            {"pattern": "def main", "path": "src"},
            "m" * 3,
            '[grep] "def main" in src (3 chars result)',
        ),
        ("find", {"q": "*.py"}, "", '[find] "*.py" (0 chars result)'),
        (
            "write_file",
            {"path": "out.txt", "content": "c" * 900},
            "ok",
            "[write_file] out.txt (2 chars result)",
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "/repo/x.py"},
            "v" * 2_000,
            "[str_replace_editor] view /repo/x.py (2,000 chars result)",
        ),
        (
            "browser_navigate",
            {"url": "https://example.org/a"},
            "p" * 5,
            "[browser_navigate] https://example.org/a (5 chars)",
        ),
    ],
)
def test_builtin_briefs(name: str, args: dict[str, Any], output: str, expected: str) -> None:
    assert brief_for(name, args, output) == expected


@pytest.mark.parametrize("key", ["command", "cmd", "code"])
def test_execute_brief_reads_every_command_key(key: str) -> None:
    output = "\n".join(f"line {i}" for i in range(31)) + "\n5 passed, 1 failed"
    brief = brief_for("execute", {key: "npm test"}, output)
    assert brief.startswith('[execute] "npm test" -> 32 lines output')
    assert brief.endswith("last: 5 passed, 1 failed")


def test_bash_and_shell_use_the_execute_brief() -> None:
    assert brief_for("bash", {"command": "ls"}, "a\nb").startswith('[bash] "ls" -> 2 lines output')
    assert brief_for("shell", {"cmd": "pwd"}, "/").startswith('[shell] "pwd" -> 1 lines output')


def test_paths_never_come_out_as_question_marks_when_given() -> None:
    for key in ("path", "file_path", "file", "filename"):
        assert "?" not in brief_for("read_file", {key: "src/app.py"}, "x" * 600)


def test_generic_brief_for_unknown_tools() -> None:
    brief = brief_for(
        "lookup_flight", {"flight": "LX 38", "date": "2024-05-01", "n": 2, "more": 1}, "r" * 800
    )
    assert brief == "[lookup_flight] flight=LX 38 date=2024-05-01 n=2 (800 chars)"
    assert brief_for("noop", {}, "x") == "[noop] (1 chars)"


def test_user_registry_wins_over_builtins() -> None:
    def mine(name: str, args: Mapping[str, Any], output: str) -> str:
        return f"<{name}:{args['path']}:{len(output)}>"

    assert (
        brief_for("read_file", {"path": "p"}, "abc", registry={"read_file": mine})
        == "<read_file:p:3>"
    )


def test_a_failing_user_brief_falls_back_to_generic() -> None:
    def broken(name: str, args: Mapping[str, Any], output: str) -> str:
        raise KeyError("nope")

    assert brief_for("t", {"a": 1}, "xy", registry={"t": broken}) == "[t] a=1 (2 chars)"


def test_brief_respects_the_limit_and_is_one_line() -> None:
    brief = brief_for("bash", {"command": "echo " + "word " * 200}, "out\n" * 10, limit=60)
    assert len(brief) <= 60
    assert "\n" not in brief


def test_execute_brief_prefers_the_verdict_over_boilerplate() -> None:
    output = "collected 12 items\n...\n===== 2 failed, 10 passed in 1.2s =====\n</output>\n[Command finished]\n"
    assert brief_for("bash", {"command": "pytest"}, output).endswith(
        "last: ===== 2 failed, 10 passed in 1.2s ====="
    )
    traceback = "Traceback (most recent call last):\n  File x\nValueError: bad value\n</output>"
    assert brief_for("bash", {"command": "python x.py"}, traceback).endswith(
        "last: ValueError: bad value"
    )
    plain = "line one\nthe actual last words\n</output>\n"
    assert brief_for("bash", {"command": "ls"}, plain).endswith("last: the actual last words")
