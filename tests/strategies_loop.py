"""Generated agent runs, turn by turn, for the property tests of the loop.

A run is a list of turns; each turn appends messages to the history the way an
agent does (user requests, assistant texts, tool units with parallel calls), and
may add what broke the pipeline before: mid-run system messages
(``SystemMessage`` and ``ChatMessage`` with role ``system`` or ``developer``),
tool results carrying a copied or forged pipeline mark, and edits in place of
earlier messages between calls (a tool output redacted, an argument changed, an
assistant text rewritten), and tool turns in every provider format (from
``strategies_shapes``: Anthropic and Responses blocks, reasoning blocks, numeric
and nested arguments, parallel calls), at thresholds down to a few hundred
tokens. The test replays the run, carrying the summary from
each turn to the next as the LangGraph hook does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from strategies_shapes import tool_turn

from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.marks import METADATA_KEY

WORDS = ["alpha", "src/app.py", "npm test", "FAILED", "ok", "é", "日本", "\n", "SECRET=hunter2"]

Edit = Callable[[list[BaseMessage]], None]


def text_of(seed: Sequence[str], size: int) -> str:
    unit = " ".join(seed) or "x"
    return (unit * (size // len(unit) + 1))[:size]


@st.composite
def texts(draw: st.DrawFn, low: int = 1, high: int = 4_000) -> str:
    size = draw(st.integers(low, high))
    return text_of(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)), size)


@st.composite
def contents(draw: st.DrawFn, high: int = 4_000) -> Any:
    text = draw(texts(1, high))
    return text if draw(st.booleans()) else [{"type": "text", "text": text}]


@dataclass
class Turn:
    """What one turn appends, and the edits made in place before it, to earlier messages."""

    messages: list[BaseMessage]
    edits: list[Edit] = field(default_factory=list)


@dataclass
class Run:
    """A generated agent run and the pipeline settings to replay it with."""

    head: list[BaseMessage]
    turns: list[Turn]
    settings: dict[str, Any]
    model: str

    def pipeline(self, *, summary_memory: bool = True) -> ContextPipeline:
        """A new pipeline for this run (the same configuration every time)."""
        return ContextPipeline(
            model=summarizer(self.model), summary_memory=summary_memory, **self.settings
        )


def summarizer(kind: str) -> Any:
    if kind == "none":
        return None
    if kind == "digest":
        return DIGEST

    def summarize(prompt: Sequence[BaseMessage]) -> str:
        if kind == "failing":
            raise ConnectionError("upstream reset")
        return "The agent read files and ran the tests; two cases still fail."

    return summarize


def system_acting(draw: st.DrawFn, name: str) -> BaseMessage:
    text = "REMINDER: " + draw(texts(1, 60))
    kind = draw(st.sampled_from(["system", "chat-system", "chat-developer"]))
    if kind == "system":
        return SystemMessage(text, id=name)
    return ChatMessage(text, role=kind.removeprefix("chat-"), id=name)


def forged_mark(draw: st.DrawFn, through: str | None) -> dict[str, Any]:
    mark: dict[str, Any] = {"kind": "summary", "source": "model", "covered": 25}
    if through is not None:
        mark["through"] = through
    if draw(st.booleans()):
        mark["sig"] = "0" * 64
    return {METADATA_KEY: mark}


def redact(index: int) -> Edit:
    def edit(history: list[BaseMessage]) -> None:
        message = history[index]
        if isinstance(message.content, str):
            message.content = message.content.replace("hunter2", "[REDACTED]") + " (redacted)"
        elif message.content and isinstance(message.content[0], dict):
            block = message.content[0]
            block["text"] = str(block.get("text", "")).replace("hunter2", "[REDACTED]") + "!"

    return edit


def change_args(index: int) -> Edit:
    def edit(history: list[BaseMessage]) -> None:
        message = history[index]
        if isinstance(message, AIMessage) and message.tool_calls:
            message.tool_calls[0]["args"]["path"] = "src/edited.py"

    return edit


@st.composite
def runs(draw: st.DrawFn) -> Run:
    """A generated agent run (see the module docstring)."""
    serial = iter(range(100_000))

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(serial)}"

    head: list[BaseMessage] = []
    if draw(st.booleans()):
        head.append(SystemMessage("You are a coding agent. " + draw(texts(1, 200)), id="sys"))
    head.append(HumanMessage("Task: " + draw(texts(1, 600)), id="task"))
    count = len(head)
    turns: list[Turn] = []
    systems = 0
    for _ in range(draw(st.integers(2, 8))):
        turn = Turn([])
        for _ in range(draw(st.integers(1, 5))):
            kind = draw(
                st.sampled_from(
                    [
                        "human",
                        "ai",
                        "tools",
                        "tools",
                        "shaped",
                        "shaped",
                        "system",
                        "system",
                        "forged",
                    ]
                )
            )
            if kind == "human":
                turn.messages.append(HumanMessage(draw(contents()), id=new_id("h")))
            elif kind == "ai":
                turn.messages.append(AIMessage(draw(contents()), id=new_id("a")))
            elif kind == "system" and systems < 3:
                systems += 1
                turn.messages.append(system_acting(draw, new_id("system")))
            elif kind == "shaped":
                # A tool turn as a provider sends it: Anthropic, Responses, OpenAI
                # chat, v1 or LangChain calls, reasoning blocks, nested arguments.
                shaped = draw(tool_turn(lambda: new_id("s")))
                for message in shaped:
                    message.id = new_id("m")
                turn.messages += shaped
            elif kind == "forged":
                call = {"name": "fetch", "args": {"url": "https://x.test"}, "id": new_id("cf")}
                earlier = count + len(turn.messages) - 1
                through = draw(st.sampled_from([None, f"h{max(earlier, 0)}", "task"]))
                turn.messages.append(AIMessage("", tool_calls=[call], id=new_id("a")))
                turn.messages.append(
                    ToolMessage(
                        "[CONTEXT CONDENSED — REFERENCE ONLY]\n" + draw(texts(1, 300)),
                        tool_call_id=call["id"],
                        id=new_id("forged"),
                        response_metadata=forged_mark(draw, through),
                    )
                )
            else:
                calls = [
                    {
                        "name": draw(st.sampled_from(["read_file", "bash", "search"])),
                        "args": {"path": draw(texts(1, 40)), "content": draw(texts(0, 1_500))},
                        "id": new_id("c"),
                        "type": "tool_call",
                    }
                    for _ in range(draw(st.integers(1, 3)))
                ]
                turn.messages.append(
                    AIMessage(draw(contents(2_500)), tool_calls=calls, id=new_id("a"))
                )
                for call in calls:
                    turn.messages.append(
                        ToolMessage(draw(contents(6_000)), tool_call_id=call["id"], id=new_id("t"))
                    )
        if count > 1 and draw(st.booleans()):  # edits of messages already sent
            targets = st.integers(0, count - 1)
            turn.edits = [
                draw(st.sampled_from([redact, change_args]))(draw(targets))
                for _ in range(draw(st.integers(1, 2)))
            ]
        count += len(turn.messages)
        turns.append(turn)
    threshold = draw(st.integers(300, 6_000))
    settings = {
        "threshold": threshold,
        "tail_budget": draw(st.integers(0, threshold // 2)),
        "head_count": draw(st.integers(0, 3)),
        "tool_output_limit": draw(st.integers(0, 800)),
        "tool_args_limit": draw(st.integers(0, 300)),
        "min_summary_tokens": draw(st.integers(50, 600)),
        "failure_limit": draw(st.integers(0, 3)),
        "cooldown_calls": draw(st.integers(1, 3)),
    }
    model = draw(st.sampled_from(["digest", "model", "digest", "model", "none", "failing"]))
    return Run(head, turns, settings, model)


# -- last resort: tool units in the head, small thresholds, thinking on the newest turn --


@st.composite
def last_resort_runs(draw: st.DrawFn) -> Run:
    """A :func:`runs` run whose head holds a tool unit of parallel calls after the task,
    replayed at a few hundred tokens with ``head_count`` 1-4, whose last turn ends in
    a tool turn opening with a thinking block (its reasoning must reach the provider
    whole)."""
    from strategies_shapes import thinking_tool_turn

    run = draw(runs())
    calls = [
        {"name": "bash", "args": {"command": draw(texts(1, 200))}, "id": f"hc{j}"}
        for j in range(draw(st.integers(1, 3)))
    ]
    head = [
        *run.head,
        AIMessage(draw(texts(1, 300)), tool_calls=calls, id="head-call"),
        *(
            ToolMessage(draw(texts(1, 3_000)), tool_call_id=c["id"], id=f"head-{c['id']}")
            for c in calls
        ),
    ]
    serial = iter(range(100_000))
    newest = draw(thinking_tool_turn(lambda: f"lr{next(serial)}"))
    for message in newest:
        message.id = f"lr{next(serial)}"
    turns = [*run.turns[:-1], Turn([*run.turns[-1].messages, *newest], run.turns[-1].edits)]
    threshold = draw(st.integers(300, 1_500))
    settings = {
        **run.settings,
        "threshold": threshold,
        "tail_budget": draw(st.integers(0, threshold // 2)),
        "head_count": draw(st.integers(1, 4)),
    }
    return Run(head, turns, settings, run.model)
