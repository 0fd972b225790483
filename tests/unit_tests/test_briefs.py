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


# -- names in briefs ---------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402

from langchain_context_pipeline import Pruner  # noqa: E402
from langchain_context_pipeline.messages.references import format_ref, message_ref  # noqa: E402
from langchain_context_pipeline.stages.briefs import with_names  # noqa: E402
from langchain_context_pipeline.tokens.estimate import text_tokens  # noqa: E402

LISTING = (
    "total 48\n"
    + "".join(f"-rw-r--r-- 1 dev dev 2048 Jan 1 src/billing/invoice_{i}.py\n" for i in range(8))
    + "class InvoiceBuilder:\n    def build_total(self): return compute_tax(order)\n" * 60
)


def old_result(output: str, name: str = "bash") -> list[BaseMessage]:
    call = {"name": name, "args": {"command": "ls -l src/billing"}, "id": "c1"}
    return [
        HumanMessage("task"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(output, tool_call_id="c1"),
        AIMessage("later " * 400),
        HumanMessage("go on"),
    ]


def test_a_brief_fills_its_line_with_the_names_its_result_holds() -> None:
    messages = old_result(LISTING)
    brief = Pruner(tail_budget=50).invoke(messages)[2].content
    assert isinstance(brief, str) and len(brief) <= 500
    assert brief.startswith('[bash] "ls -l src/billing" -> ')
    assert brief.endswith(format_ref(message_ref(messages[2])))
    named = brief.split(" names: ", 1)[1].rsplit(" ref=", 1)[0].split()
    assert named[:3] == [
        "src/billing/invoice_0.py",
        "src/billing/invoice_1.py",
        "src/billing/invoice_2.py",
    ]
    assert "InvoiceBuilder" in named
    # Names the line holds already (its last output line) are not listed again.
    assert "build_total" in brief.split(" names: ")[0] and "build_total" not in named
    assert len(named) == len(set(named)), "a name is listed twice"
    # Plain words, numbers and permission strings are no names.
    assert not {"total", "class", "2048", "-rw-r--r--", "dev"} & set(named)


def test_brief_names_can_be_turned_off_and_never_touch_a_users_brief() -> None:
    messages = old_result(LISTING)
    plain = Pruner(tail_budget=50, brief_names=False).invoke(messages)[2].content
    assert isinstance(plain, str) and "names:" not in plain and "invoice_0" not in plain
    own = Pruner(tail_budget=50, briefs={"bash": lambda n, a, o: "[bash] listed"})
    assert own.invoke(messages)[2].content.startswith("[bash] listed ref=")
    # brief_for adds names only when asked (the Pruner asks, by its setting).
    assert "names:" not in brief_for("bash", {"command": "ls"}, LISTING)
    assert "names:" in brief_for("bash", {"command": "ls"}, LISTING, names=True)


def test_markup_tags_are_no_names() -> None:
    """A tool's ``</returncode>`` is no path (before: listed as ``/returncode``)."""
    output = "<returncode>0</returncode>\n<output>\n" + LISTING + "</output>\n<br/>"
    output += "\nlet v: Vec<MyType> = load();"
    out = with_names("[bash] ls", output, 2_000)
    named = out.split(" names: ", 1)[1].split()
    assert "src/billing/invoice_0.py" in named
    assert "MyType" in named  # a generic type's name is no tag
    assert not [n for n in named if "returncode" in n or "output" in n or n.strip("/") == "br"]


_pieces = st.sampled_from(
    [
        "src/a.py",
        "x",
        "snake_case_name",
        "CamelCase",
        "os.path",
        "42",
        " ",
        "\n",
        "(",
        ")",
        "héllo_wörld",
        "a_b",
        "..",
        "/",
        "__init__",
        "ALL_CAPS",
        "mixedCase",
        "::",
        "ünïcode/päth",
    ]
)


@given(
    st.text(max_size=120),
    st.lists(_pieces, max_size=400).map("".join),
    st.integers(0, 600),
)
def test_with_names_stays_within_its_limit_and_adds_only_names_of_the_output(
    line: str, output: str, limit: int
) -> None:
    out = with_names(line, output, limit)
    assert out.startswith(line)
    if out == line:
        return
    assert len(out) <= limit
    # The names never make the line cost more than the output it stands for.
    assert text_tokens(out) <= text_tokens(output)
    added = out[len(line) :].removeprefix(" names: ").split(" ")
    assert all(name and name in output for name in added)
    assert all(name not in line for name in added)
    assert len(added) == len(set(added))
