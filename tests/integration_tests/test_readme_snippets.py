"""The README's snippets for the agent entry points run, and do what they say.

Each snippet sits in README.md right below its marker (``<!-- snippet: NAME -->``
right above a python code block). Each runs with ``model``
(a scripted tool-calling chat model with a 20k-token window, which also answers the
summarizer's calls) and ``tools`` defined, for 40 tool steps. Every request the model
receives, its system prompt and the tools' schemas included, stays within the budget.
The snippets may not silence warnings: ``create_react_agent``'s deprecation must reach
the reader, and the other entry points must warn about nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import SystemMessage

from langchain_context_pipeline import estimate_tokens, is_pipeline_summary
from langchain_context_pipeline.tokens.calibration import request_overhead
from tests.integration_tests.scripted_model import TOOLS, ScriptedToolModel
from tests.support.invariants import orphans, unanswered

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("agent-middleware", "langgraph-hook", "react-agent-hook")
# Lines of code (blank lines aside) a snippet may take: a hand-built graph wires its
# nodes and edges itself.
MAX_LINES = {"agent-middleware": 10, "langgraph-hook": 16, "react-agent-hook": 10}
DEPRECATED = {"react-agent-hook": "create_react_agent has been moved"}
SNIPPET = re.compile(
    r"<!--\s*snippet:\s*(?P<name>[\w-]+)\s*-->\s*\n```python\n(?P<code>.*?)\n```", re.DOTALL
)
WINDOW = 20_000
STEPS = 40


def snippets_in(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    return {m["name"]: m["code"] for m in SNIPPET.finditer(path.read_text(encoding="utf-8"))}


def snippet(name: str) -> tuple[Path, str]:
    """The snippet ``name`` from README.md."""
    path = ROOT / "README.md"
    found = snippets_in(path)
    assert name in found, f"README.md has no snippet {name!r} (it has {sorted(found)})"
    return path, found[name]


def test_snippets_are_found() -> None:
    assert set(snippets_in(ROOT / "README.md")) == set(NAMES)
    for name in NAMES:
        _, code = snippet(name)
        limit = MAX_LINES[name]
        lines = [line for line in code.splitlines() if line.strip()]
        assert len(lines) <= limit, f"{name} is longer than {limit} lines"


@pytest.mark.parametrize("name", NAMES)
def test_snippet_runs(name: str) -> None:
    path, code = snippet(name)
    model = ScriptedToolModel(steps=STEPS, profile={"max_input_tokens": WINDOW})
    namespace: dict[str, Any] = {"model": model, "tools": TOOLS}
    compiled = compile(code, f"{path.name}[{name}]", "exec")
    if name in DEPRECATED:  # the warning reaches the caller: the snippet does not hide it
        with pytest.warns(DeprecationWarning, match=DEPRECATED[name]):
            exec(compiled, namespace)
    else:
        exec(compiled, namespace)

    result = namespace["result"]
    assert str(result["messages"][-1].content).startswith(f"Done after {STEPS} steps")
    budget = int(WINDOW * 0.8)
    for request in model.requests:
        # The whole request: messages (a system prompt included) and the tools' schemas.
        schemas = json.dumps(request.tools, ensure_ascii=False, sort_keys=True)
        assert request.tools, "the model was called without the tools"
        used = estimate_tokens(request.messages) + estimate_tokens([SystemMessage(schemas)])
        assert used <= budget
        assert not orphans(request.messages) and not unanswered(request.messages)
        task = next(m for m in request.messages if not isinstance(m, SystemMessage))
        assert task.content == "Fix the failing test"
    if "hook" in namespace:  # the hook was told what the model is sent beside the messages
        hook, first = namespace["hook"], model.requests[0]
        system = next((m for m in first.messages if isinstance(m, SystemMessage)), None)
        sent = request_overhead(hook.pipeline.token_counter, system, TOOLS)
        assert hook.reserved_tokens >= sent, "pass the hook system_prompt= and tools="
    # Compression really happened, and the agent's model wrote the summaries.
    assert model.summaries
    assert any(is_pipeline_summary(m) for r in model.requests for m in r.messages)


PLAIN_BLOCK = re.compile(r"(?<!-->\n)```python\n(?P<code>.*?)\n```", re.DOTALL)


def plain_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [m["code"] for m in PLAIN_BLOCK.finditer(text)]


def test_readme_has_plain_examples() -> None:
    assert len(plain_blocks()) >= 2


@pytest.mark.parametrize("index", range(2))
def test_plain_readme_example_runs(
    index: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    code = plain_blocks()[index]
    exec(compile(code, f"README.md[python {index}]", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_readme_names_every_extra() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"\(extras: (?P<list>[^)]*)\)", text)
    assert listed, "README.md lists no extras"
    named = set(re.findall(r"(?:^|,\s+)`([\w-]+)`", listed["list"]))  # each item's first name
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on 3.10
    table = pyproject.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+) = \[", table, re.MULTILINE))
    assert extras >= {"langgraph", "agents"}
    assert named == extras, f"README.md lists {sorted(named)}, pyproject.toml has {sorted(extras)}"
