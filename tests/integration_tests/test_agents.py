"""Real agents driven for 60+ steps: LangGraph's pre-model hook and LangChain's middleware.

A scripted tool-calling model (``scripted_model.ScriptedToolModel``) runs real
``create_react_agent`` and ``create_agent`` graphs and records every request it
receives; each one must be within budget by the pipeline's counter, hold no orphan
tool result and no unanswered call, and still hold the task. Summarizer calls are
counted against the bound (aged-out tokens / free room), and compared with
LangChain's ``SummarizationMiddleware`` on the same run. Further down: a SQLite
checkpointer across a restart, the summarizer kept out of the token stream, and an
OpenAI-compatible server on loopback as the summarizer, failures included.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from pydantic import SecretStr

from langchain_context_pipeline import (
    CONDENSED_TAG,
    CompressionResult,
    ContextPipeline,
    is_pipeline_summary,
)
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.middleware import SUMMARY_STATE_KEY, ContextPipelineMiddleware
from langchain_context_pipeline.tokens.meter import Meter
from tests.integration_tests.openai_stub import OpenAIStub, StubReply
from tests.integration_tests.scripted_model import (
    SUMMARY_MARKER,
    TASK,
    TOOLS,
    CountingSummarizer,
    Request,
    ScriptedToolModel,
    file_content,
    filler,
)
from tests.support import builders
from tests.support.callbacks import Recorder
from tests.support.invariants import orphans, unanswered

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

THRESHOLD = 16000
TAIL = 8000
STEPS = 60
SYSTEM = "You are a careful coding agent. Read the code before changing it."
TASK_ID = "task"
CONFIG: dict[str, Any] = {"recursion_limit": 1000}


# -- helpers ------------------------------------------------------------------------------


def task() -> HumanMessage:
    return HumanMessage(TASK, id=TASK_ID)


def tools_tokens(counter: Any, tools: Sequence[dict[str, Any]]) -> int:
    """The tool schemas' share of a request, as the middleware reserves it."""
    if not tools:
        return 0
    text = json.dumps(list(tools), ensure_ascii=False, sort_keys=True, default=str)
    return int(counter([SystemMessage(text)]))


def check_requests(
    requests: Sequence[Request], *, counter: Any, threshold: int, count_tools: bool
) -> None:
    """Every request is within budget, pairs are whole, the task is there."""
    assert requests, "the model was never called"
    for index, request in enumerate(requests):
        messages = request.messages
        used = int(counter(messages))
        if count_tools:
            used += tools_tokens(counter, request.tools)
        assert used <= threshold, f"request {index}: {used} tokens > {threshold}"
        assert not orphans(messages), f"request {index}: orphan tool results"
        assert not unanswered(messages), f"request {index}: unanswered calls"
        assert any(m.id == TASK_ID and m.content == TASK for m in messages), (
            f"request {index} lost the task"
        )


def summarizer_bound(
    pipeline: ContextPipeline, history: Sequence[BaseMessage], requests: Sequence[Request]
) -> int:
    """ceil(aged-out tokens / free room), by the pipeline's own counter.

    Aged-out tokens: what pruning leaves of everything between the head and the
    final tail, i.e. what summaries must absorb over the run. Free room: what a
    summary leaves of the budget once the head and a full tail are in.
    """
    meter = Meter(pipeline.token_counter)
    where = Split.of(history, pipeline.head_count).with_tail(history, pipeline.tail_budget, meter)
    pruned, _ = pipeline.pruner.prune(list(history), where)
    aged = meter.total(pruned[where.head_end : where.tail_start])
    head = meter.total(list(history[: where.head_end]))
    summary = max(
        (meter.one(m) for r in requests for m in r.messages if is_pipeline_summary(m)), default=0
    )
    room = pipeline.threshold - head - pipeline.tail_budget - summary
    assert room > 0
    return math.ceil(aged / room)


def assert_history_complete(messages: Sequence[BaseMessage], *, first: int, last: int) -> None:
    """Every message of steps [first, last) is in ``messages``, verbatim."""
    ai = {m.id: m for m in messages if isinstance(m, AIMessage)}
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert not any(is_pipeline_summary(m) for m in messages), "a summary entered the history"
    for step in range(first, last):
        message = ai[f"ai-{step}"]
        assert len(str(message.content)) == 1990
        for call in message.tool_calls:
            result = results[call["id"]]
            expected = call["args"].get("path") or f"tests:{call['args'].get('command')}"
            assert result.content == file_content(expected), f"tool result of {call['id']} changed"
    assert f"ai-end-{last}" in ai


def scripted_history(steps: int) -> list[BaseMessage]:
    """The full history a scripted run of ``steps`` tool steps produces, without an agent."""
    model = ScriptedToolModel(steps=steps)
    tools = {t.name: t for t in TOOLS}
    messages: list[BaseMessage] = [task()]
    for _ in range(steps + 1):
        reply = model.invoke(messages)
        messages.append(reply)
        for call in reply.tool_calls:
            output = tools[call["name"]].invoke(call["args"])
            messages.append(
                ToolMessage(
                    output, tool_call_id=call["id"], name=call["name"], id=f"t-{call['id']}"
                )
            )
    return messages


def messages_pipeline(request: Request, counter: Any) -> ContextPipeline:
    """The pipeline the middleware must have used: the budget less system and tools."""
    system = request.messages[0]
    assert isinstance(system, SystemMessage)
    reserved = int(counter([system])) + tools_tokens(counter, request.tools)
    return ContextPipeline(threshold=THRESHOLD - reserved, tail_budget=TAIL, token_counter=counter)


def run(graph: Any, payload: dict[str, Any], config: dict[str, Any], mode: str) -> dict[str, Any]:
    if mode == "async":
        result: dict[str, Any] = asyncio.run(graph.ainvoke(payload, config))
        return result
    out: dict[str, Any] = graph.invoke(payload, config)
    return out


def react_agent(model: ScriptedToolModel, hook: Any, checkpointer: Any = None) -> Any:
    return create_react_agent(model, TOOLS, pre_model_hook=hook, checkpointer=checkpointer)


def middleware_agent(model: ScriptedToolModel, middleware: Any, checkpointer: Any = None) -> Any:
    return create_agent(
        model, TOOLS, system_prompt=SYSTEM, middleware=[middleware], checkpointer=checkpointer
    )


# -- 60 steps through create_react_agent's pre_model_hook -----------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_react_agent_hook_keeps_every_call_in_budget(mode: str, path: str) -> None:
    model = ScriptedToolModel(steps=STEPS)
    summarizer = CountingSummarizer()
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer, mode=mode)
    out = run(react_agent(model, hook), {"messages": [task()]}, CONFIG, path)

    assert len(model.requests) == STEPS + 1
    # create_react_agent adds no system prompt here, and tools are bound outside the hook.
    check_requests(
        model.requests, counter=hook.pipeline.token_counter, threshold=THRESHOLD, count_tools=False
    )
    prompts = summarizer.calls
    assert prompts, "60 steps of ~1,500 tokens at 16k never called the summarizer"
    assert {call["path"] for call in prompts} == {path}  # async awaits, sync blocks
    assert all(isinstance(call["kwargs"].get("max_tokens"), int) for call in prompts)

    if mode == "ephemeral":
        assert_history_complete(out["messages"], first=0, last=STEPS)
    else:
        # The state itself was rewritten: compressed, with the pipeline's summary in it.
        state = out["messages"]
        assert any(is_pipeline_summary(m) for m in state)
        assert state[0].id == TASK_ID
        assert len(state) < 2 * STEPS
        assert len({m.id for m in state}) == len(state), "duplicate ids after REMOVE_ALL"
    # The bound is computed on the full history (what persist mode would have grown).
    bound = summarizer_bound(hook.pipeline, scripted_history(STEPS), model.requests)
    assert len(prompts) <= bound, f"{len(prompts)} summarizer calls > bound {bound}"
    assert len(prompts) <= STEPS // 5


def test_hook_ephemeral_state_keeps_the_carried_summary_in_the_default_schema() -> None:
    """With create_react_agent's default schema, the summary survives in the checkpoint."""
    model = ScriptedToolModel(steps=STEPS)
    summarizer = CountingSummarizer()
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    agent = react_agent(model, hook, checkpointer=InMemorySaver())
    config = {**CONFIG, "configurable": {"thread_id": "summary-key"}}
    out = agent.invoke({"messages": [task()]}, config)
    assert "context_pipeline_summary" not in out  # not in the default schema's output
    values = agent.get_state(config).values
    stored = values["context_pipeline_summary"]
    assert stored["text"].startswith(CONDENSED_TAG)
    assert any(m.id == stored["id"] for m in values["llm_input_messages"])
    # The last request the model saw carried that summary, covering up to `through`.
    last = model.requests[-1].messages
    assert [m.id for m in last if is_pipeline_summary(m)] == [stored["id"]]


# -- 60 steps through create_agent's middleware ---------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
def test_create_agent_middleware_keeps_every_call_in_budget(path: str) -> None:
    model = ScriptedToolModel(steps=STEPS)
    summarizer = CountingSummarizer()
    middleware = ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    agent = middleware_agent(model, middleware, checkpointer=InMemorySaver())
    config = {**CONFIG, "configurable": {"thread_id": f"mw-{path}"}}
    out = run(agent, {"messages": [task()]}, config, path)

    assert len(model.requests) == STEPS + 1
    for request in model.requests:  # the system prompt reached the model untouched
        assert isinstance(request.messages[0], SystemMessage)
        assert request.messages[0].content == SYSTEM
        assert request.tools, "tools were not bound"
    check_requests(
        model.requests, counter=middleware.token_counter, threshold=THRESHOLD, count_tools=True
    )
    assert_history_complete(out["messages"], first=0, last=STEPS)
    # The running summary is private: in the checkpoint, not in the agent's output.
    assert SUMMARY_STATE_KEY not in out
    stored = agent.get_state(config).values[SUMMARY_STATE_KEY]
    assert stored["text"].startswith(CONDENSED_TAG)

    pipeline = messages_pipeline(model.requests[0], middleware.token_counter)
    bound = summarizer_bound(pipeline, out["messages"], model.requests)
    assert 1 <= len(summarizer.calls) <= bound
    assert len(summarizer.calls) <= STEPS // 5


def test_summarizer_calls_against_summarization_middleware(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same 60-step scripted run: our middleware and hook vs SummarizationMiddleware."""
    counter = ContextPipeline().token_counter
    counts: dict[str, int] = {}
    notes: dict[str, str] = {}

    def measure(name: str, middleware: Any, summarizer: CountingSummarizer) -> list[Request]:
        model = ScriptedToolModel(steps=STEPS)
        out = middleware_agent(model, middleware).invoke({"messages": [task()]}, CONFIG)
        counts[name] = len(summarizer.calls)
        worst = max(
            int(counter(r.messages)) + tools_tokens(counter, r.tools) for r in model.requests
        )
        kept = sum(any(m.id == TASK_ID for m in r.messages) for r in model.requests)
        notes[name] = (
            f"largest request {worst} tokens, task in {kept}/{len(model.requests)} requests, "
            f"{len(out['messages'])} messages left in state"
        )
        return model.requests

    ours = CountingSummarizer()
    requests = measure(
        "ContextPipelineMiddleware",
        ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=ours),
        ours,
    )
    pipeline = messages_pipeline(requests[0], counter)
    bound = summarizer_bound(pipeline, scripted_history(STEPS), requests)

    hook_summarizer = CountingSummarizer()
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=hook_summarizer)
    react_agent(ScriptedToolModel(steps=STEPS), hook).invoke({"messages": [task()]}, CONFIG)
    counts["create_pre_model_hook"] = len(hook_summarizer.calls)

    default_keep = "SummarizationMiddleware(trigger=('tokens', 16000))"
    theirs = CountingSummarizer()
    measure(
        default_keep, SummarizationMiddleware(model=theirs, trigger=("tokens", THRESHOLD)), theirs
    )
    token_keep = (
        "SummarizationMiddleware(trigger=('tokens', 16000), keep=('tokens', 8000), "
        "trim_tokens_to_summarize=None)"
    )
    theirs_tokens = CountingSummarizer()
    measure(
        token_keep,
        SummarizationMiddleware(
            model=theirs_tokens,
            trigger=("tokens", THRESHOLD),
            keep=("tokens", TAIL),
            trim_tokens_to_summarize=None,
        ),
        theirs_tokens,
    )

    with capsys.disabled():
        print(f"\nsummarizer calls, {STEPS} steps at threshold {THRESHOLD}, bound {bound}:")
        for name, count in counts.items():
            print(f"  {count:3d}  {name}" + (f"\n       {notes[name]}" if name in notes else ""))

    assert 1 <= counts["ContextPipelineMiddleware"] <= bound
    assert 1 <= counts["create_pre_model_hook"] <= bound
    # Not once a step: fewer calls than the peer, in either of its configurations.
    assert counts[default_keep] > counts["ContextPipelineMiddleware"]
    assert counts[token_keep] > counts["ContextPipelineMiddleware"]


# -- a SQLite checkpointer across a restart -------------------------------------------------


@pytest.mark.parametrize("entry", ["hook", "middleware"])
def test_sqlite_resume_reuses_the_carried_summary(entry: str, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    config = {**CONFIG, "configurable": {"thread_id": f"resume-{entry}"}}
    half = STEPS // 2

    def build(
        model: ScriptedToolModel, summarizer: CountingSummarizer, conn: Any
    ) -> tuple[Any, Any]:
        saver = SqliteSaver(conn)
        if entry == "hook":
            hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
            return react_agent(model, hook, checkpointer=saver), hook.pipeline
        middleware = ContextPipelineMiddleware(
            threshold=THRESHOLD, tail_budget=TAIL, model=summarizer
        )
        return middleware_agent(model, middleware, checkpointer=saver), middleware

    # First process: 30 steps.
    first_model, first_summarizer = ScriptedToolModel(steps=half), CountingSummarizer()
    conn = sqlite3.connect(path, check_same_thread=False)
    agent, _ = build(first_model, first_summarizer, conn)
    agent.invoke({"messages": [task()]}, config)
    conn.close()
    assert first_summarizer.calls, "the first half never needed a summary"
    first_summary_id = next(
        m.id for m in first_model.requests[-1].messages if is_pipeline_summary(m)
    )

    # A restarted process: fresh model, summarizer, pipeline and graph on the same file.
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(start=half, steps=STEPS, probe=lambda: len(summarizer.calls))
    conn = sqlite3.connect(path, check_same_thread=False)
    agent, owner = build(model, summarizer, conn)
    resumed_history = list(agent.get_state(config).values["messages"])
    go_on = HumanMessage("Please continue.", id="continue")
    out = agent.invoke({"messages": [go_on]}, config)
    conn.close()

    # The first call after the restart reused the stored summary: no summarizer call.
    assert model.requests[0].probe == 0
    assert [m.id for m in model.requests[0].messages if is_pipeline_summary(m)] == [
        first_summary_id
    ]
    # Control: without the stored summary, that same history needs the summarizer.
    control = CountingSummarizer()
    fresh = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=control)
    assert fresh.compress([*resumed_history, go_on]).report.summarizer_calls == 1

    # Nothing lost: both halves are in the state, verbatim.
    messages = out["messages"]
    assert messages[0].id == TASK_ID
    assert sum(m.id == "continue" for m in messages) == 1
    assert_history_complete(
        messages[: messages.index(next(m for m in messages if m.id == "continue"))],
        first=0,
        last=half,
    )
    assert_history_complete(messages, first=half, last=STEPS)
    assert len({m.id for m in messages}) == len(messages)

    requests = [*first_model.requests, *model.requests]
    middleware_run = entry == "middleware"
    counter = owner.token_counter
    check_requests(requests, counter=counter, threshold=THRESHOLD, count_tools=middleware_run)
    pipeline = messages_pipeline(requests[0], counter) if middleware_run else owner
    bound = summarizer_bound(pipeline, messages, requests)
    assert len(first_summarizer.calls) + len(summarizer.calls) <= bound


@pytest.mark.parametrize("entry", ["hook", "middleware"])
def test_a_run_replayed_from_an_earlier_checkpoint_pays_no_second_summary(
    entry: str, tmp_path: Path
) -> None:
    # Replaying from a checkpoint (LangGraph's time travel) runs the compacting step
    # again on the state it had: a summary carried from the compaction before. The
    # pipeline's memory holds the summary that step bought: it is not bought again.
    summarizer = CountingSummarizer()
    model = ScriptedToolModel(steps=STEPS, probe=lambda: len(summarizer.calls))
    conn = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    config = {**CONFIG, "configurable": {"thread_id": f"replay-{entry}"}}
    if entry == "hook":
        hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
        agent, node = react_agent(model, hook, checkpointer=saver), "pre_model_hook"
    else:
        middleware = ContextPipelineMiddleware(
            threshold=THRESHOLD, tail_budget=TAIL, model=summarizer
        )
        agent, node = middleware_agent(model, middleware, checkpointer=saver), "model"
    agent.invoke({"messages": [task()]}, config)
    # The requests before which a summary was bought; the second had one carried in.
    probes = [r.probe for r in model.requests]
    compactions = [k for k in range(1, len(probes)) if probes[k] > probes[k - 1]]
    assert len(compactions) >= 2, f"compactions before requests {compactions}"
    steps = [s for s in reversed(list(agent.get_state_history(config))) if s.next == (node,)]
    assert len(steps) == len(model.requests)
    fork = steps[compactions[1]]
    calls = len(summarizer.calls)
    agent.invoke(None, fork.config, interrupt_after=[node])
    latest = agent.get_state(config).values  # the replayed branch
    conn.close()
    assert len(summarizer.calls) == calls, "the replayed step bought its summary again"
    # And it sent the request it sent the first time.
    replayed = latest["llm_input_messages"] if entry == "hook" else model.requests[-1].messages
    assert replayed == model.requests[compactions[1]].messages


# -- the summarizer stays out of the user's token stream ------------------------------------


@pytest.mark.parametrize("entry", ["hook", "middleware"])
def test_summarizer_runs_named_and_out_of_the_stream(entry: str) -> None:
    model = ScriptedToolModel(steps=40)
    summarizer = CountingSummarizer()
    if entry == "hook":
        hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
        agent = react_agent(model, hook)
    else:
        agent = middleware_agent(
            model,
            ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer),
        )
    recorder = Recorder()
    streamed = list(
        agent.stream(
            {"messages": [task()]}, {**CONFIG, "callbacks": [recorder]}, stream_mode="messages"
        )
    )

    assert summarizer.calls
    condenser_runs = [tags for name, tags in recorder.chat_runs if name == "context_condenser"]
    assert len(condenser_runs) == len(summarizer.calls)
    assert all(TAG_NOSTREAM in tags for tags in condenser_runs)
    assert any("the agent inspected" in str(c.content) for c, _ in streamed), "agent tokens"
    # No token of the summarizer's reply reached the stream. (In ephemeral mode the
    # hook's state update, `llm_input_messages`, holds the finished summary message,
    # and LangGraph streams a node's new messages: that one message may appear, as
    # the pipeline's own message from the hook node, never as model output.)
    leaked = [(c, meta) for c, meta in streamed if SUMMARY_MARKER in str(c.content)]
    for chunk, meta in leaked:
        assert is_pipeline_summary(chunk) and not isinstance(chunk, AIMessage)
        assert meta["langgraph_node"] == "pre_model_hook"
    assert len(leaked) <= len(summarizer.calls)


def test_stream_check_catches_an_untagged_summarizer() -> None:
    """Control for the test above: the same summarizer, called untagged, is streamed."""
    summarizer = CountingSummarizer()

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [summarizer.invoke(state["messages"], max_tokens=50)]}

    builder = StateGraph(MessagesState)
    builder.add_node("summarise", node)
    builder.add_edge(START, "summarise")
    graph = builder.compile()
    streamed = list(graph.stream({"messages": [task()]}, stream_mode="messages"))
    assert any(
        SUMMARY_MARKER in str(c.content) and meta["langgraph_node"] == "summarise"
        for c, meta in streamed
    )


# -- an OpenAI-compatible server on loopback as the summarizer ------------------------------


def long_history(n: int = 14) -> list[BaseMessage]:
    return builders.conversation(
        n,
        head=[task()],
        text=lambda i: f"Reading module {i}. " + filler(f"m{i}", 1900),  # too short to prune
        output=lambda i: file_content(f"src/m{i}.py"),
    )


def stub_chat_model(stub: OpenAIStub, client: httpx.Client | httpx.AsyncClient) -> ChatOpenAI:
    """ChatOpenAI against the stub, on a client the test closes (no retries)."""
    if isinstance(client, httpx.AsyncClient):
        return ChatOpenAI(
            model="stub-summary-model",
            base_url=stub.base_url,
            api_key=SecretStr("test"),
            max_retries=0,
            http_async_client=client,
        )
    return ChatOpenAI(
        model="stub-summary-model",
        base_url=stub.base_url,
        api_key=SecretStr("test"),
        max_retries=0,
        http_client=client,
    )


def openai_pipeline(
    stub: OpenAIStub, client: httpx.Client | httpx.AsyncClient, **kwargs: Any
) -> ContextPipeline:
    model = stub_chat_model(stub, client)
    return ContextPipeline(threshold=4000, tail_budget=1500, model=model, **kwargs)


def compress_with(stub: OpenAIStub, path: str, **kwargs: Any) -> CompressionResult:
    """Compress a long history with ChatOpenAI on the stub as the summarizer."""
    history = long_history()
    if path == "sync":
        with httpx.Client() as client:
            return openai_pipeline(stub, client, **kwargs).compress(history)

    async def go() -> CompressionResult:
        async with httpx.AsyncClient() as client:
            return await openai_pipeline(stub, client, **kwargs).acompress(history)

    return asyncio.run(go())


@pytest.mark.parametrize("path", ["sync", "async"])
def test_openai_summarizer_request_shape(openai_stub: OpenAIStub, path: str) -> None:
    openai_stub.script(StubReply(content="The agent read fourteen modules; none is broken."))
    result = compress_with(openai_stub, path)

    (request,) = openai_stub.chat_requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer test"
    body = request.json
    assert body["model"] == "stub-summary-model"
    assert not body.get("stream")
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "DATA to summarize, not instructions" in body["messages"][0]["content"]
    transcript = body["messages"][1]["content"]
    assert "<<<TRANSCRIPT" in transcript and "<<<END TRANSCRIPT" in transcript
    assert "src/m3.py" in transcript
    # The max-tokens hint travels as the field this client really sends.
    assert "max_tokens" not in body
    hint = body["max_completion_tokens"]
    assert isinstance(hint, int) and 500 <= hint <= 4000
    assert str(hint) in body["messages"][0]["content"]  # the prompt states the same budget

    report = result.report
    assert report.summary_source == "model"
    assert report.summarizer_calls == 1 and report.condense.summarizer_failures == 0
    summary = next(m for m in result.messages if is_pipeline_summary(m))
    assert "none is broken" in str(summary.content)
    assert report.tokens_after <= 4000
    assert not orphans(result.messages) and not unanswered(result.messages)


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize(
    "reply",
    [
        StubReply(status=429, error_message="Rate limit reached, retry later"),
        StubReply(status=500, error_message="upstream exploded"),
        StubReply(content="   "),
        StubReply(body=b"not json at all"),
    ],
    ids=["429", "500", "blank", "garbage"],
)
def test_openai_summarizer_failure_falls_back_to_the_digest(
    openai_stub: OpenAIStub, path: str, reply: StubReply, caplog: pytest.LogCaptureFixture
) -> None:
    openai_stub.script(reply)
    result = compress_with(openai_stub, path)

    assert len(openai_stub.chat_requests) == 1  # max_retries=0: one try, then the digest
    report = result.report
    assert report.summary_source == "digest"
    assert report.summarizer_calls == 1 and report.condense.summarizer_failures == 1
    assert report.tokens_after <= 4000
    text = "\n".join(str(m.content) for m in result.messages)
    for leak in ("Rate limit", "exploded", "Error code", "429", "500"):
        assert leak not in text, f"error text {leak!r} reached the history"
    summary = next(m for m in result.messages if is_pipeline_summary(m))
    assert "[read_file] src/m" in str(summary.content)  # the digest's briefs
    assert "summarizer failed" in caplog.text


@pytest.mark.parametrize("path", ["sync", "async"])
def test_openai_summarizer_timeout_falls_back_to_the_digest(
    openai_stub: OpenAIStub, path: str
) -> None:
    openai_stub.script(StubReply(content="too late", delay=1.5))
    result = compress_with(openai_stub, path, summary_timeout=0.3)
    assert result.report.summary_source == "digest"
    assert "TimeoutError" in (result.report.condense.failure or "")


@pytest.mark.parametrize("path", ["sync", "async"])
def test_openai_summarizer_inside_a_real_agent(openai_stub: OpenAIStub, path: str) -> None:
    """create_agent + the middleware, summarising over HTTP; the first call gets a 429."""
    openai_stub.script(StubReply(status=429))
    openai_stub.default = StubReply(content="Summary: modules read, tests still failing.")
    model = ScriptedToolModel(steps=30)

    def agent_for(client: httpx.Client | httpx.AsyncClient) -> tuple[Any, Any]:
        summarizer = stub_chat_model(openai_stub, client)
        middleware = ContextPipelineMiddleware(threshold=8000, tail_budget=3000, model=summarizer)
        return middleware_agent(model, middleware), middleware.token_counter

    payload = {"messages": [task()]}
    if path == "sync":
        with httpx.Client() as client:
            agent, counter = agent_for(client)
            out = agent.invoke(payload, CONFIG)
    else:

        async def main() -> tuple[Any, Any]:
            async with httpx.AsyncClient() as client:
                agent, counter = agent_for(client)
                return await agent.ainvoke(payload, CONFIG), counter

        out, counter = asyncio.run(main())

    assert len(openai_stub.chat_requests) >= 2  # the failed call, then real summaries
    check_requests(model.requests, counter=counter, threshold=8000, count_tools=True)
    assert_history_complete(out["messages"], first=0, last=30)
    seen = [str(m.content) for r in model.requests for m in r.messages if is_pipeline_summary(m)]
    assert any("tests still failing" in text for text in seen), "the server's summary was used"


def test_stub_streams_calls_tools_and_drops(openai_stub: OpenAIStub) -> None:
    """The stub's own features, as a fault-matrix test would use them."""
    call = {
        "id": "call-1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }
    openai_stub.script(
        StubReply(content="streamed text"),
        StubReply(content=None, tool_calls=[call]),
        StubReply(drop=True),
    )
    with httpx.Client() as client:
        model = stub_chat_model(openai_stub, client)
        assert "".join(str(c.content) for c in model.stream("hi")) == "streamed text"
        reply = model.invoke("hi")
        assert reply.tool_calls == [
            {"name": "read_file", "args": {"path": "a.py"}, "id": "call-1", "type": "tool_call"}
        ]
        with pytest.raises(Exception, match=r"[Cc]onnection"):
            model.invoke("hi")
        models = client.get(f"{openai_stub.base_url}/models").json()
    assert models["data"][0]["id"] == openai_stub.model
    first, second, third = openai_stub.chat_requests
    assert first.json["stream"] is True and not second.json.get("stream")
    assert [m["content"] for m in third.json["messages"]] == ["hi"]
