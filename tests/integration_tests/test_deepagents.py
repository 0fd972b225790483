"""deepagents' ``create_deep_agent`` with the pipeline as its context manager.

A scripted tool-calling model drives a real deep agent for 40 steps; at two steps
it delegates to a subagent (a declarative one, then the general-purpose one), each
of which runs 25 steps of its own. The model has a profile (a 20,000-token window),
so deepagents' own summarization would start at 85% of it: the control test shows
it does, and the other tests show it no longer does once the pipeline has its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_context_pipeline.deepagents import (
    DeepAgentContextMiddleware,
    create_deep_agent,
    with_context_pipeline,
)
from tests.integration_tests.scripted_model import CountingSummarizer
from tests.support.fakes import Call, FailingModel, ReplyingChatModel
from tests.support.invariants import orphans, unanswered

deepagents = pytest.importorskip("deepagents")

pytestmark = [pytest.mark.integration]

WINDOW = 20000
THRESHOLD = 16000
STEPS = 40
SUB_STEPS = 25
TASK = "Audit the payments service and list every handler that skips validation."
SUBTASKS = {
    10: ("researcher", "SUBTASK research: read the refund handlers and report."),
    20: ("general-purpose", "SUBTASK general: read the webhook handlers and report."),
}
RESEARCHER = {
    "name": "researcher",
    "description": "Reads code and reports findings.",
    "system_prompt": "You read code carefully and report what you find.",
}
CONFIG: dict[str, Any] = {"recursion_limit": 1000}


def page(query: str) -> str:
    """What ``lookup`` returns: about 4,000 characters, deterministic per query."""
    digest = hashlib.sha256(query.encode()).hexdigest()
    line = f"{digest[:12]} handler {query} validates input then calls process()\n"
    return (line * (4000 // len(line) + 1))[:4000]


@tool
def lookup(query: str) -> str:
    """Look a handler up in the code base."""
    return page(query)


class DeepScriptedModel(ReplyingChatModel):
    """Follows one script per conversation, keyed by the conversation's first user message.

    The main conversation calls ``lookup`` for ``STEPS`` steps and delegates at the
    steps in ``SUBTASKS``; a subagent conversation calls ``lookup`` for ``SUB_STEPS``
    steps. Every request is recorded with the tool schemas bound to it.
    """

    llm_type = "deep-scripted"
    requests: list[tuple[str, list[BaseMessage], list[dict[str, Any]]]] = Field(
        default_factory=list
    )
    steps: dict[str, int] = Field(default_factory=dict)
    summaries: list[list[BaseMessage]] = Field(default_factory=list)

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        if not call.kwargs.get("tools"):  # deepagents' own summarizer call: no tools bound
            self.summaries.append(list(messages))
            return AIMessage("A summary written by deepagents.")
        asks = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        key = "main" if TASK in asks else next((a for a in asks if a.startswith("SUBTASK")), "?")
        self.requests.append((key, list(messages), list(call.kwargs.get("tools") or [])))
        step = self.steps.get(key, 0)
        self.steps[key] = step + 1
        tag = "m" if key == "main" else hashlib.sha256(key.encode()).hexdigest()[:6]
        last = STEPS if key == "main" else SUB_STEPS
        if step >= last:
            return AIMessage(f"Finished {key} after {step} steps.", id=f"{tag}-end")
        text = f"Step {step} of {key}: " + "noting what the handler does. " * 40
        if key == "main" and step in SUBTASKS:
            kind, description = SUBTASKS[step]
            args = {"description": description, "subagent_type": kind}
            tool_call = {"name": "task", "args": args, "id": f"{tag}-{step}", "type": "tool_call"}
        else:
            args = {"query": f"{tag} handler {step}"}
            tool_call = {"name": "lookup", "args": args, "id": f"{tag}-{step}", "type": "tool_call"}
        return AIMessage(text, tool_calls=[tool_call], id=f"{tag}-ai-{step}")


def new_model() -> DeepScriptedModel:
    return DeepScriptedModel(profile={"max_input_tokens": WINDOW})


def run(agent: Any, path: str, thread: str) -> dict[str, Any]:
    config = {**CONFIG, "configurable": {"thread_id": thread}}
    payload = {"messages": [HumanMessage(TASK)]}
    if path == "async":
        result: dict[str, Any] = asyncio.run(agent.ainvoke(payload, config))
    else:
        result = agent.invoke(payload, config)
    state = agent.get_state(config).values
    return {**result, "_state": state}


def tools_tokens(counter: Any, tools: Sequence[dict[str, Any]]) -> int:
    if not tools:
        return 0
    text = json.dumps(list(tools), ensure_ascii=False, sort_keys=True, default=str)
    return int(counter([SystemMessage(text)]))


def check_requests(model: DeepScriptedModel, counter: Any) -> None:
    """Every request within budget, pairs whole, its conversation's task present."""
    keys = {key for key, _, _ in model.requests}
    assert keys == {"main", *(d for _, d in SUBTASKS.values())}, keys
    for index, (key, messages, tools) in enumerate(model.requests):
        used = int(counter(messages)) + tools_tokens(counter, tools)
        assert used <= THRESHOLD, f"request {index} ({key}): {used} > {THRESHOLD}"
        assert not orphans(messages), f"request {index} ({key}): orphan tool results"
        assert not unanswered(messages), f"request {index} ({key}): unanswered calls"
        task = TASK if key == "main" else key
        assert any(isinstance(m, HumanMessage) and m.content == task for m in messages), (
            f"request {index} ({key}) lost its task"
        )
    assert model.steps["main"] == STEPS + 1
    assert all(model.steps[d] == SUB_STEPS + 1 for _, d in SUBTASKS.values())


def no_deepagents_summary(out: dict[str, Any]) -> None:
    state = out["_state"]
    assert state.get("_summarization_event") is None
    assert not any(path.startswith("/conversation_history") for path in state.get("files", {}))


def compressed(model: DeepScriptedModel, key: str) -> bool:
    """Whether the pipeline cut some request of conversation ``key`` (a brief or a summary)."""
    return any(
        (isinstance(m, ToolMessage) and len(str(m.content)) < 4000)
        or "CONTEXT CONDENSED" in str(m.content)
        for k, messages, _ in model.requests
        if k == key
        for m in messages
    )


# -- deepagents alone (control) -------------------------------------------------------------


def test_deepagents_alone_summarizes_with_its_own_middleware() -> None:
    """Control: without the pipeline, this run makes deepagents summarize (and fail)."""
    from deepagents import create_deep_agent as plain_create_deep_agent

    model = new_model()
    agent = plain_create_deep_agent(
        model, [lookup], subagents=[RESEARCHER], checkpointer=InMemorySaver()
    )
    with contextlib.suppress(ContextOverflowError):  # deepagents may give up, too
        run(agent, "sync", "control")
    assert model.summaries, "deepagents never summarized"
    assert any(key == "?" for key, _, _ in model.requests), "no request lost its task"


# -- the pipeline in deepagents' slot -------------------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
def test_deep_agent_with_the_pipeline_for_main_agent_and_subagents(path: str) -> None:
    model = new_model()
    summarizer = CountingSummarizer()
    context = DeepAgentContextMiddleware(
        threshold=("fraction", THRESHOLD / WINDOW), tail_budget=4000, model=summarizer
    )
    agent = create_deep_agent(
        model, [lookup], context=context, subagents=[RESEARCHER], checkpointer=InMemorySaver()
    )
    out = run(agent, path, f"deep-{path}")

    check_requests(model, context.token_counter)
    no_deepagents_summary(out)
    assert summarizer.calls, "the pipeline never summarized"
    assert {call["path"] for call in summarizer.calls} == {path}
    # The main agent and both subagents were compressed by the pipeline.
    assert compressed(model, "main")
    assert all(compressed(model, d) for _, d in SUBTASKS.values())


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_failing_summarizer_does_not_abort_the_deep_agent(path: str) -> None:
    model = new_model()
    failing = FailingModel()
    context = DeepAgentContextMiddleware(
        threshold=THRESHOLD, tail_budget=4000, model=failing, summary_timeout=None
    )
    agent = create_deep_agent(
        model, [lookup], context=context, subagents=[RESEARCHER], checkpointer=InMemorySaver()
    )
    out = run(agent, path, f"failing-{path}")

    assert failing.calls >= 1
    check_requests(model, context.token_counter)
    no_deepagents_summary(out)
    assert out["messages"][-1].content.startswith("Finished main")


def test_middleware_in_deepagents_own_create_deep_agent_replaces_the_slot() -> None:
    """The same middleware passed straight to deepagents takes the slot in every stack."""
    from deepagents import create_deep_agent as plain_create_deep_agent

    model = new_model()
    context = DeepAgentContextMiddleware(threshold=THRESHOLD, tail_budget=4000, model=None)
    agent = plain_create_deep_agent(
        model,
        [lookup],
        middleware=[context],
        subagents=with_context_pipeline([RESEARCHER], context),
        checkpointer=InMemorySaver(),
    )
    out = run(agent, "sync", "plain")
    check_requests(model, context.token_counter)
    no_deepagents_summary(out)


def test_with_context_pipeline_copies_specs_and_keeps_compiled_ones() -> None:
    context = DeepAgentContextMiddleware(threshold=THRESHOLD, model=None)
    compiled = {"name": "c", "description": "d", "runnable": object()}
    specs = [RESEARCHER, compiled]
    out = with_context_pipeline(specs, context)
    assert out[0]["middleware"] == [context]
    assert "middleware" not in RESEARCHER  # the caller's spec is untouched
    assert out[1] == compiled and "middleware" not in out[1]
    with pytest.raises(TypeError, match="DeepAgentContextMiddleware"):
        with_context_pipeline(specs, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"subagents\[0\]"):
        with_context_pipeline(["researcher"], context)  # type: ignore[list-item]
