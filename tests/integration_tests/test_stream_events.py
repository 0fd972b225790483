"""A compressing call shows in the stream (one custom event) and in traces (run metadata).

Real agent loops (``create_react_agent`` with the hook, ``create_agent`` with the
middleware) are streamed with ``stream_mode=["updates", "custom"]``; each event is
matched to the model call it precedes and checked against what the model really
received and the history at that call, not against the pipeline's own report.
"""

from __future__ import annotations

import asyncio
from typing import Any
from unittest.mock import MagicMock
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tracers import LangChainTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_pipeline import is_pipeline_summary
from langchain_context_pipeline.core.events import EVENT_TYPE, METADATA_PREFIX
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from tests.integration_tests.scripted_model import (
    TASK,
    TOOLS,
    CountingSummarizer,
    ScriptedToolModel,
)
from tests.support.callbacks import RunLog

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

THRESHOLD = 16000
TAIL = 8000
STEPS = 40
SYSTEM = "You are a careful coding agent."
CONFIG: dict[str, Any] = {"recursion_limit": 1000}
FIGURES = {
    "tokens_before",
    "tokens_after",
    "threshold",
    "limit",
    "stages",
    "summary_written",
    "summary_reused",
    "summary_source",
    "summarizer_calls",
}


def stream(agent: Any, node: str, path: str) -> tuple[list[Any], list[BaseMessage]]:
    """Stream a run; return the custom event (or None) before each call of ``node``.

    Also returns the conversation the run built, as the checkpoint holds it.
    """
    payload = {"messages": [HumanMessage(TASK, id="task")]}
    config = {**CONFIG, "configurable": {"thread_id": f"{node}-{path}"}}
    modes = ["updates", "custom"]

    async def collect() -> list[tuple[str, Any]]:
        return [chunk async for chunk in agent.astream(payload, config, stream_mode=modes)]

    if path == "async":
        chunks = asyncio.run(collect())
    else:
        chunks = list(agent.stream(payload, config, stream_mode=modes))
    per_call: list[Any] = []
    pending: Any = None
    for mode, chunk in chunks:
        if mode == "custom":
            assert pending is None, "two events before one model call"
            pending = chunk
        elif node in chunk:
            per_call.append(pending)
            pending = None
    assert pending is None
    return per_call, list(agent.get_state(config).values["messages"])


def histories(history: list[BaseMessage], calls: int) -> list[list[BaseMessage]]:
    """The conversation before each model call: everything before that call's reply."""
    ids = [m.id for m in history]
    return [history[: ids.index(f"ai-{i}" if i < STEPS else f"ai-end-{i}")] for i in range(calls)]


def check_events(
    events: list[Any],
    model: ScriptedToolModel,
    histories: list[list[BaseMessage]],
    counter: Any,
) -> None:
    assert len(events) == len(model.requests) == STEPS + 1
    previous_calls = 0
    kinds = set()
    for index, (event, request, history) in enumerate(
        zip(events, model.requests, histories, strict=True)
    ):
        sent = [m for m in request.messages if not isinstance(m, SystemMessage)]
        calls = request.probe
        wrote = calls > previous_calls
        earlier_summary = previous_calls > 0
        previous_calls = calls
        if [m.content for m in sent] == [m.content for m in history]:
            assert event is None, f"call {index}: an event on a no-op call"
            kinds.add("noop")
            continue
        assert event is not None, f"call {index}: the request changed but nothing was emitted"
        assert event["type"] == EVENT_TYPE
        assert set(event) == FIGURES | {"type"}
        assert event["tokens_before"] == counter(history), f"call {index}"
        assert event["tokens_after"] == counter(sent), f"call {index}"
        assert event["tokens_after"] <= event["limit"] <= event["threshold"] == THRESHOLD
        assert event["summary_written"] == wrote, f"call {index}"
        has_summary = any(is_pipeline_summary(m) for m in sent)
        if wrote:  # a carried summary may have stood in first, then been merged
            assert not event["summary_reused"] or earlier_summary, f"call {index}"
        else:
            assert event["summary_reused"] == has_summary, f"call {index}"
        assert set(event["stages"]) <= {"prune", "condense", "truncate"}
        assert ("condense" in event["stages"]) == wrote
        assert event["summary_source"] == ("model" if wrote else None)
        kinds.add("written" if wrote else "reused" if has_summary else "pruned")
    assert {"noop", "written", "reused"} <= kinds, kinds


@pytest.mark.parametrize("path", ["sync", "async"])
def test_react_agent_streams_one_event_per_compressing_call(path: str) -> None:
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(steps=STEPS, probe=lambda: len(summarizer.calls))
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    agent = create_react_agent(model, TOOLS, pre_model_hook=hook, checkpointer=InMemorySaver())
    events, history = stream(agent, "pre_model_hook", path)
    check_events(
        events, model, histories(history, len(model.requests)), hook.pipeline.token_counter
    )


@pytest.mark.parametrize("path", ["sync", "async"])
def test_create_agent_middleware_streams_one_event_per_compressing_call(path: str) -> None:
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(steps=STEPS, probe=lambda: len(summarizer.calls))
    middleware = ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    agent = create_agent(
        model, TOOLS, system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    events, history = stream(agent, "model", path)
    check_events(events, model, histories(history, len(model.requests)), middleware.token_counter)


# -- traces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("entry", ["hook", "middleware"])
def test_each_pass_is_a_run_with_the_report_as_metadata(entry: str, path: str) -> None:
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(steps=STEPS)
    log = RunLog()
    if entry == "hook":
        hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
        agent: Any = create_react_agent(model, TOOLS, pre_model_hook=hook)
        parent_name = hook.get_name()  # the hook's own run, inside the graph's node
    else:
        middleware = ContextPipelineMiddleware(
            threshold=THRESHOLD, tail_budget=TAIL, model=summarizer
        )
        agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
        parent_name = "model"
    payload = {"messages": [HumanMessage(TASK, id="task")]}
    config = {**CONFIG, "callbacks": [log]}
    if path == "async":
        asyncio.run(agent.ainvoke(payload, config))
    else:
        agent.invoke(payload, config)

    by_id: dict[UUID, Run] = {run.id: run for run in log.chains}
    passes = [run for run in log.chains if run.name == "ContextPipeline"]
    assert len(passes) == len(model.requests) == STEPS + 1
    for run in passes:
        assert by_id[run.parent_run_id].name == parent_name
        meta = {
            k[len(METADATA_PREFIX) :]: v
            for k, v in run.metadata.items()
            if k.startswith(METADATA_PREFIX)
        }
        assert set(meta) == FIGURES
        assert meta["tokens_after"] <= meta["limit"] <= meta["threshold"] == THRESHOLD
    written = [run for run in passes if run.metadata[METADATA_PREFIX + "summary_written"]]
    noop = [run for run in passes if not run.metadata[METADATA_PREFIX + "stages"]]
    assert written and noop
    # The summarizer's runs are named, and each sits inside the pass that made it.
    condenser = [run for run in log.chat_models if run.name == "context_condenser"]
    assert (
        len(condenser)
        == len(summarizer.calls)
        == sum(run.metadata[METADATA_PREFIX + "summarizer_calls"] for run in passes)
    )
    pass_ids = {run.id for run in written}
    assert all(run.parent_run_id in pass_ids for run in condenser)


def test_langsmith_receives_the_metadata_with_the_pass_run() -> None:
    """LangSmith's tracer sends the metadata with the run (its client is a recorder here)."""
    client = MagicMock()
    tracer = LangChainTracer(client=client, project_name="context-pipeline-test")
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(steps=STEPS)
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    agent = create_react_agent(model, TOOLS, pre_model_hook=hook)
    agent.invoke({"messages": [HumanMessage(TASK, id="task")]}, {**CONFIG, "callbacks": [tracer]})
    tracer.wait_for_futures()

    sent = [call.kwargs for call in client.update_run.call_args_list]
    sent += [call.kwargs for call in client.create_run.call_args_list]
    passes = [kw for kw in sent if kw.get("name") == "ContextPipeline" and kw.get("end_time")]
    assert len(passes) == STEPS + 1, [kw.get("name") for kw in sent][:10]
    metadata = [kw["extra"]["metadata"] for kw in passes]
    assert all(METADATA_PREFIX + "tokens_before" in m for m in metadata)
    assert any(m[METADATA_PREFIX + "summary_written"] for m in metadata)
