"""The README's snippets for the two agent entry points run, and do what they say.

The snippets live in README.md once it holds both markers (``<!-- snippet: NAME -->``
right above a python code block), else in docs/snippets.md. Each runs with ``model``
(a scripted tool-calling chat model with a 20k-token window, which also answers the
summarizer's calls) and ``tools`` defined, for 40 tool steps.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from invariants import orphans, unanswered
from langchain_core.messages import SystemMessage
from scripted_model import TOOLS, ScriptedToolModel

from langchain_context_pipeline import estimate_tokens, is_pipeline_summary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("langgraph-hook", "agent-middleware")
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
    """The snippet ``name``, from README.md if it has them all, else docs/snippets.md."""
    for path in (ROOT / "README.md", ROOT / "docs" / "snippets.md"):
        found = snippets_in(path)
        if set(NAMES) <= set(found):
            return path, found[name]
    raise AssertionError(f"no file holds the snippets {NAMES}")


def test_snippets_are_found() -> None:
    for name in NAMES:
        path, code = snippet(name)
        assert path.name in {"README.md", "snippets.md"}
        assert len(code.strip().splitlines()) <= 10, f"{name} is longer than 10 lines"


@pytest.mark.parametrize("name", NAMES)
def test_snippet_runs(name: str) -> None:
    path, code = snippet(name)
    model = ScriptedToolModel(steps=STEPS, profile={"max_input_tokens": WINDOW})
    namespace: dict[str, Any] = {"model": model, "tools": TOOLS}
    exec(compile(code, f"{path.name}[{name}]", "exec"), namespace)

    result = namespace["result"]
    assert str(result["messages"][-1].content).startswith(f"Done after {STEPS} steps")
    budget = int(WINDOW * 0.8)
    for request in model.requests:
        used = estimate_tokens(request.messages)
        if name == "agent-middleware":  # the middleware budgets the tool schemas too
            schemas = json.dumps(request.tools, ensure_ascii=False, sort_keys=True)
            used += estimate_tokens([SystemMessage(schemas)])
        assert used <= budget
        assert not orphans(request.messages) and not unanswered(request.messages)
        assert request.messages[0].content == "Fix the failing test"
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
