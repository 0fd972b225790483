"""A scripted tool-calling chat model, its tools, and a counting summarizer.

``ScriptedToolModel`` drives a real agent loop: at each call it asks for one tool
call (two in parallel every ``parallel_every`` steps) with an assistant text of
``text_chars`` characters, until ``steps`` tool steps are done, then answers. It
records every request it receives (messages and bound tool schemas), so a test can
check what the agent really sent to the model. Asked to summarise (a call tagged
``nostream``, as the pipeline's summarizer calls are), it answers with a short
summary instead, records the call in ``summaries`` and does not advance its script:
the agent's own model can be the summarizer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, tool
from pydantic import Field, PrivateAttr

from tests.support.fakes import Call, ReplyingChatModel

TASK = "Fix the failing test in the payments service and explain the root cause."
SUMMARY_MARKER = "SCRIPTED-SUMMARY"

_WORDS = (
    "the agent inspected module output, compared results against expectations and "
    "noted which functions still need attention before moving on to the next file "
)


def filler(seed: str, chars: int) -> str:
    """Deterministic prose of exactly ``chars`` characters."""
    digest = hashlib.sha256(seed.encode()).hexdigest()
    text = f"[{digest[:8]}] "
    while len(text) < chars:
        text += _WORDS
    return text[:chars]


def file_content(path: str) -> str:
    """What ``read_file`` returns: 3,000 to 6,000 characters, deterministic per path."""
    size = 3000 + int(hashlib.sha256(path.encode()).hexdigest(), 16) % 3001
    lines: list[str] = []
    i = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"{i:04d} def handler_{i}(request): return process(request, '{path}')")
        i += 1
    return "\n".join(lines)[:size]


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return file_content(path)


@tool
def run_tests(command: str) -> str:
    """Run a test command."""
    return file_content(f"tests:{command}")


TOOLS: list[BaseTool] = [read_file, run_tests]


@dataclass
class Request:
    """One request the scripted model received."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    probe: Any = None


class ScriptedToolModel(ReplyingChatModel):
    """Calls tools for ``steps`` steps (counting from ``start``), then answers."""

    llm_type = "scripted-tool-model"
    steps: int = 60
    start: int = 0
    text_chars: int = 1990
    parallel_every: int = 7
    probe: Callable[[], Any] | None = None
    requests: list[Request] = Field(default_factory=list)
    summaries: list[list[BaseMessage]] = Field(default_factory=list)
    _calls: int = PrivateAttr(default=0)

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        if "nostream" in call.tags:
            self.summaries.append(list(messages))
            return AIMessage(f"{SUMMARY_MARKER}: modules read so far, the bug is not found yet.")
        probe = self.probe() if self.probe is not None else None
        self.requests.append(Request(list(messages), list(call.kwargs.get("tools") or []), probe))
        step = self.start + self._calls
        self._calls += 1
        if step >= self.steps:
            return AIMessage(
                f"Done after {step} steps: the bug was an off-by-one.", id=f"ai-end-{step}"
            )
        calls = [
            {
                "name": "read_file",
                "args": {"path": f"src/payments/module_{step}.py"},
                "id": f"call-{step}-0",
                "type": "tool_call",
            }
        ]
        if self.parallel_every and step % self.parallel_every == self.parallel_every - 1:
            calls.append(
                {
                    "name": "run_tests",
                    "args": {"command": f"pytest tests/test_module_{step}.py"},
                    "id": f"call-{step}-1",
                    "type": "tool_call",
                }
            )
        return AIMessage(filler(f"step {step}", self.text_chars), tool_calls=calls, id=f"ai-{step}")


class CountingSummarizer(ReplyingChatModel):
    """A summarizer that writes ``fill`` of the max-tokens hint it is given, and counts calls.

    Each call is recorded with its prompt, its keyword arguments and the path
    (``"sync"`` or ``"async"``) it came through.
    """

    llm_type = "counting-summarizer"
    fill: float = 0.9
    max_tokens: int | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _reply(self, messages: list[BaseMessage], call: Call) -> str:
        self.calls.append(
            {"messages": list(messages), "kwargs": dict(call.kwargs), "path": call.path}
        )
        hint = call.kwargs.get("max_tokens") or 1000
        head = f"{SUMMARY_MARKER} #{len(self.calls)}: "
        return head + filler(f"summary {len(self.calls)}", max(int(hint * 4 * self.fill) - 80, 40))
