"""A system message added in the middle of a run stays in every later model call.

Real agents with a checkpointer: a first invocation runs 20 tool steps, a second
one starts with a ``SystemMessage`` policy and runs 40 more, long enough for the
carried summary to be reused and to be replaced by a new one. The policy must
reach every model call of the second invocation: through ``create_react_agent``
with the pre-model hook (ephemeral mode), and ``create_agent`` with the
middleware; sync and async; with the digest and with a model as the summarizer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_pipeline import DIGEST, is_pipeline_summary
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from tests.integration_tests.scripted_model import (
    TASK,
    TOOLS,
    CountingSummarizer,
    ScriptedToolModel,
)
from tests.support.invariants import orphans, unanswered

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

POLICY = "POLICY: never push to main."
FIRST = 20
LAST = 60


def build(entry: str, summarizer: Any, saver: InMemorySaver) -> Any:
    if entry == "hook":
        hook = create_pre_model_hook(threshold=16000, tail_budget=8000, model=summarizer)
        return lambda model: create_react_agent(
            model, TOOLS, pre_model_hook=hook, checkpointer=saver
        )
    middleware = ContextPipelineMiddleware(threshold=16000, tail_budget=8000, model=summarizer)
    return lambda model: create_agent(
        model, TOOLS, system_prompt="You are careful.", middleware=[middleware], checkpointer=saver
    )


@pytest.mark.parametrize("summarizer", ["digest", "model"])
@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("entry", ["hook", "middleware"])
def test_a_policy_added_at_the_second_invocation_reaches_every_later_call(
    entry: str, path: str, summarizer: str
) -> None:
    counting = CountingSummarizer()
    agent = build(entry, DIGEST if summarizer == "digest" else counting, InMemorySaver())
    config = {"recursion_limit": 1000, "configurable": {"thread_id": f"{entry}-{path}"}}

    def invoke(model: ScriptedToolModel, messages: list[Any]) -> None:
        graph = agent(model)
        if path == "async":
            asyncio.run(graph.ainvoke({"messages": messages}, config))
        else:
            graph.invoke({"messages": messages}, config)

    invoke(ScriptedToolModel(steps=FIRST), [HumanMessage(TASK, id="task")])
    second = ScriptedToolModel(start=FIRST, steps=LAST)
    invoke(second, [SystemMessage(POLICY, id="policy"), HumanMessage("Go on.", id="go-on")])

    assert len(second.requests) == LAST - FIRST + 1
    for index, request in enumerate(second.requests):
        policies = [m for m in request.messages if m.id == "policy"]
        assert len(policies) == 1 and policies[0].content == POLICY, f"call {index} lost it"
        assert not orphans(request.messages) and not unanswered(request.messages)
    summarized = [any(is_pipeline_summary(m) for m in r.messages) for r in second.requests]
    assert sum(summarized) >= 10, "the run hardly leaned on a summary: the case was not reached"
    if summarizer == "model":
        assert counting.calls, "the model never summarized"
