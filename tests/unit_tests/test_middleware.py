"""ContextPipelineMiddleware without an agent: settings, the budget, the running summary."""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import sys
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents.middleware import (
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

import langchain_context_pipeline
from langchain_context_pipeline import DIGEST, estimate_tokens, is_pipeline_summary
from langchain_context_pipeline.middleware import (
    SUMMARY_STATE_KEY,
    ContextPipelineAgentState,
    ContextPipelineMiddleware,
)
from tests.support.builders import PROSE
from tests.support.builders import unprunable_conversation as conversation
from tests.support.fakes import EchoSummarizer, FailingModel
from tests.support.invariants import orphans, unanswered
from tests.support.strategies_loop import ToolEdits, editable_tool, tool_description_edits

THRESHOLD = 6000
TAIL = 2000


@tool
def read_file(path: str) -> str:
    """Read a file of the repository and return its whole content, line by line."""
    return path


def request_for(
    messages: list[BaseMessage],
    *,
    system: str | None = None,
    tools: list[Any] | None = None,
    state: dict[str, Any] | None = None,
    profile: dict[str, Any] | None = None,
) -> ModelRequest[Any]:
    return ModelRequest(
        model=GenericFakeChatModel(messages=iter([]), profile=profile),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(system) if system is not None else None,
        tools=tools or [],
        state={"messages": messages, **(state or {})},  # type: ignore[typeddict-item]
    )


class Handler:
    """The model call: records the request it gets, answers ``ok``."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest[Any]] = []
        self.response = ModelResponse(result=[AIMessage("ok")])

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        return self.response

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self(request)


def sent_tokens(request: ModelRequest[Any]) -> int:
    """What the model receives: system message, messages and tool schemas."""
    messages = list(request.messages)
    if request.system_message is not None:
        messages.insert(0, request.system_message)
    tools = [convert_to_openai_tool(t) for t in request.tools]
    schemas = json.dumps(tools, ensure_ascii=False, sort_keys=True) if tools else ""
    return estimate_tokens(messages) + (estimate_tokens([SystemMessage(schemas)]) if tools else 0)


def middleware(summarizer: Any = None, **kwargs: Any) -> ContextPipelineMiddleware:
    settings: dict[str, Any] = {"threshold": THRESHOLD, "tail_budget": TAIL, **kwargs}
    return ContextPipelineMiddleware(model=summarizer or EchoSummarizer(), **settings)


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "threshold", [0, -1, True, "32000", ("fraction", 0), ("fraction", 2), ("messages", 50)]
)
def test_malformed_threshold_fails_at_construction(threshold: Any) -> None:
    with pytest.raises(ValueError, match="threshold"):
        ContextPipelineMiddleware(threshold=threshold)


def test_bad_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="tail_budget"):
        ContextPipelineMiddleware(threshold=1000, tail_budget=1000)
    with pytest.raises(TypeError):
        ContextPipelineMiddleware(threshold=1000, tail_budgett=10)
    with pytest.raises(ValueError, match="DIGEST"):
        ContextPipelineMiddleware(model="gpt-4o")


def test_state_schema_keeps_the_summary_private() -> None:
    assert ContextPipelineMiddleware.state_schema is ContextPipelineAgentState
    hint = get_type_hints(ContextPipelineAgentState, include_extras=True)[SUMMARY_STATE_KEY]
    assert PrivateStateAttr in get_args(get_args(hint)[0])[1:]


# -- the request ------------------------------------------------------------------------------


def test_under_budget_the_request_passes_through_untouched() -> None:
    handler = Handler()
    request = request_for(conversation(1), system="Be brief.")
    out = middleware().wrap_model_call(request, handler)
    assert handler.requests == [request]
    assert handler.requests[0] is request
    assert out is handler.response


@tool(description="Search the code base. " + "Matches are ranked by relevance. " * 150)
def search(query: str) -> str:
    return query


@pytest.mark.parametrize("extra", ["system", "tools", "both"])
def test_system_message_and_tools_count_toward_the_budget(extra: str) -> None:
    messages = conversation(4)
    # The messages alone fit; the system prompt or the tool schemas push them over.
    assert estimate_tokens(messages) < THRESHOLD
    system = "You are careful. " * 300 if extra in {"system", "both"} else None
    tools = [read_file, search] if extra in {"tools", "both"} else [read_file]
    request = request_for(messages, system=system, tools=tools)
    assert sent_tokens(request) > THRESHOLD
    handler = Handler()
    middleware().wrap_model_call(request, handler)
    (sent,) = handler.requests
    assert sent is not request
    assert sent_tokens(sent) <= THRESHOLD
    # Only the messages were edited: system message and tools are the same objects.
    assert sent.system_message is request.system_message
    assert sent.tools is request.tools
    assert sent.model is request.model
    assert request.messages == messages  # the original request is untouched
    assert not orphans(sent.messages) and not unanswered(sent.messages)
    assert sent.messages[0].id == "task"


def test_carried_summary_is_written_once_then_reused() -> None:
    summarizer = EchoSummarizer()
    mw = middleware(summarizer)
    handler = Handler()
    messages = conversation(12)
    first = mw.wrap_model_call(request_for(messages), handler)
    assert len(summarizer.calls) == 1
    assert isinstance(first, ExtendedModelResponse)
    assert first.model_response is handler.response
    assert first.command is not None
    stored = first.command.update[SUMMARY_STATE_KEY]  # type: ignore[index]
    assert set(first.command.update) == {SUMMARY_STATE_KEY}  # type: ignore[arg-type]
    sent = handler.requests[0].messages
    assert [m.id for m in sent if is_pipeline_summary(m)] == [stored["id"]]

    # The next call carries the stored summary in state: no summarizer call, no write.
    grown = [*messages, *conversation(1, start=12)]
    second = mw.wrap_model_call(request_for(grown, state={SUMMARY_STATE_KEY: stored}), handler)
    assert len(summarizer.calls) == 1
    assert second is handler.response
    assert [m.id for m in handler.requests[1].messages if is_pipeline_summary(m)] == [stored["id"]]
    assert sent_tokens(handler.requests[1]) <= THRESHOLD


def carried_after(response: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The state's summary after ``response`` (the one the call wrote, if it wrote one)."""
    if isinstance(response, ExtendedModelResponse) and response.command is not None:
        update = response.command.update
        if isinstance(update, dict) and SUMMARY_STATE_KEY in update:
            return {SUMMARY_STATE_KEY: update[SUMMARY_STATE_KEY]}
    return state


def agent_turns(use_async: bool, *, fail_first: bool) -> tuple[int, list[list[BaseMessage]]]:
    """Drive 20 turns through langchain's ModelRetryMiddleware around ours.

    Returns the summarizer calls and the messages of each request the model
    answered. ``fail_first``: every turn's first model call fails (a connection
    reset), and the retry middleware calls ours again with the request, and the
    state, it had.
    """
    summarizer = EchoSummarizer()
    ours = middleware(summarizer)
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    handler = Handler()
    history, state = conversation(12), {}
    for step in range(12, 32):
        failures = iter([ConnectionError("connection reset")] if fail_first else [])

        def flaky(request: ModelRequest[Any], failures: Any = failures) -> ModelResponse[Any]:
            for error in failures:
                raise error
            return handler(request)

        async def aflaky(request: ModelRequest[Any]) -> ModelResponse[Any]:
            return flaky(request)

        async def ours_async(request: ModelRequest[Any]) -> Any:
            return await ours.awrap_model_call(request, aflaky)

        request = request_for(history, state=state)
        if use_async:
            response = asyncio.run(retry.awrap_model_call(request, ours_async))
        else:
            response = retry.wrap_model_call(request, lambda r: ours.wrap_model_call(r, flaky))
        state = carried_after(response, state)
        history = [*history, *conversation(1, start=step)]
    return len(summarizer.calls), [list(r.messages) for r in handler.requests]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_retried_model_call_pays_no_second_summary(use_async: bool) -> None:
    # A retry (langchain's ModelRetryMiddleware outside ours) calls ours again with
    # the state as it was, the summary carried from an older compaction: the one the
    # failed attempt bought is used again, not bought a second time.
    calls, sent = agent_turns(use_async, fail_first=False)
    assert calls >= 2  # compactions with a summary carried in state
    retried_calls, retried_sent = agent_turns(use_async, fail_first=True)
    assert retried_calls == calls
    assert retried_sent == sent


async def test_async_path_awaits_the_summarizer() -> None:
    summarizer = EchoSummarizer()
    handler = Handler()
    out = await middleware(summarizer).awrap_model_call(
        request_for(conversation(12), system="Be brief.", tools=[read_file]), handler.acall
    )
    assert [c["path"] for c in summarizer.calls] == ["async"]
    assert isinstance(out, ExtendedModelResponse)
    assert sent_tokens(handler.requests[0]) <= THRESHOLD


def test_a_failing_summarizer_falls_back_without_raising() -> None:
    handler = Handler()
    failing = FailingModel()
    out = middleware(failing).wrap_model_call(request_for(conversation(12)), handler)
    assert failing.calls == 1
    sent = handler.requests[0].messages
    assert sent_tokens(handler.requests[0]) <= THRESHOLD
    assert not any("rate limited" in str(m.content) for m in sent)
    assert isinstance(out, ExtendedModelResponse)  # the digest is carried like a summary


def test_one_pipeline_serves_every_system_prompt() -> None:
    """Budgets differ with the system prompt; the pipeline (and its breaker) does not."""
    mw = middleware()
    handler = Handler()
    thresholds: list[int | None] = []
    compress = mw.pipeline.compress

    def spy(*args: Any, **kwargs: Any) -> Any:
        thresholds.append(kwargs.get("threshold"))
        return compress(*args, **kwargs)

    mw.pipeline.compress = spy  # type: ignore[method-assign]
    for system in ("short", "much longer " * 100):
        mw.wrap_model_call(request_for(conversation(12), system=system), handler)
    assert thresholds == [THRESHOLD, THRESHOLD]
    assert [sent_tokens(r) <= THRESHOLD for r in handler.requests] == [True, True]


# -- budgets that cannot work -----------------------------------------------------------------


def test_fraction_threshold_reads_the_request_model_profile() -> None:
    mw = ContextPipelineMiddleware(threshold=("fraction", 0.5), tail_budget=TAIL, model=DIGEST)
    handler = Handler()
    request = request_for(conversation(12), profile={"max_input_tokens": 2 * THRESHOLD})
    mw.wrap_model_call(request, handler)
    assert estimate_tokens(conversation(12)) > THRESHOLD >= sent_tokens(handler.requests[0])


def test_fraction_threshold_with_an_unknown_profile_is_a_clear_error() -> None:
    mw = ContextPipelineMiddleware(threshold=("fraction", 0.8))
    with pytest.raises(ValueError, match=r"profile\['max_input_tokens'\]"):
        mw.wrap_model_call(request_for(conversation(1)), Handler())


async def call(mw: ContextPipelineMiddleware, request: ModelRequest[Any], path: str) -> Handler:
    handler = Handler()
    if path == "sync":
        mw.wrap_model_call(request, handler)
    else:
        await mw.awrap_model_call(request, handler.acall)
    return handler


def assert_smallest_valid(sent: list[BaseMessage], history: list[BaseMessage]) -> None:
    """The newest unit (a call and its result) cut to its minimum; a note for what went."""
    assert not orphans(sent) and not unanswered(sent)
    assert [m.id for m in sent[-2:]] == [history[-2].id, history[-1].id]
    assert any("earlier messages were removed" in str(m.content) for m in sent[:-2])
    for kept, original in zip(sent[-2:], history[-2:], strict=True):
        assert estimate_tokens([kept]) < estimate_tokens([original]) // 5


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_a_system_prompt_over_the_budget_sends_the_smallest_request_with_a_warning(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A system prompt and tools over the threshold degrade the call, not stop the agent."""
    mw = ContextPipelineMiddleware(threshold=300, tail_budget=100)
    history = conversation(3)
    request = request_for(history, system="x" * 2000, tools=[read_file])
    handler = await call(mw, request, path)
    (sent,) = handler.requests
    assert sent.system_message == request.system_message and sent.tools == request.tools
    assert_smallest_valid(list(sent.messages), history)
    assert "leave nothing of threshold 300" in caplog.text
    assert "smallest valid request" in caplog.text


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_system_messages_over_the_budget_mid_run_send_the_smallest_request(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    mw = ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=DIGEST)
    reminder = SystemMessage("Remember the policy. " * 1600, id="reminder")
    history = [*conversation(2), reminder, *conversation(2, start=2)]
    handler = await call(mw, request_for(history, system="Be brief."), path)
    sent = list(handler.requests[0].messages)
    assert any(m is reminder for m in sent)  # never dropped, never cut
    assert_smallest_valid(sent, history)
    assert "system message(s) alone take" in caplog.text


def test_tail_budget_shrinks_when_system_and_tools_leave_too_little(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mw = middleware()
    handler = Handler()
    # A system prompt that leaves less than the tail of the threshold, by the estimate.
    system = SystemMessage("")
    while estimate_tokens([system]) <= THRESHOLD - TAIL:
        system = SystemMessage(system.content + "Answer briefly. " * 20)
    assert estimate_tokens([system]) < THRESHOLD - TAIL // 2
    request = request_for(conversation(12), system=system.text)
    mw.wrap_model_call(request, handler)
    assert f"tail_budget {TAIL} cut to" in caplog.text
    assert sent_tokens(handler.requests[0]) <= THRESHOLD


# -- tools whose schemas change between calls ------------------------------------------------


def test_a_tool_description_grown_in_place_is_counted_again() -> None:
    """The schemas' count was cached by the tools' identities: the old count stayed reserved.

    The first request fits and passes through; after the description grows, the same
    request does not fit, and the same middleware must see it as a fresh one does.
    """
    tool_ = editable_tool("lookup", "Look a name up.", "the name")
    history = [*conversation(4), HumanMessage("go on", id="next")]
    mw = middleware(DIGEST)
    first = request_for(history, tools=[tool_])
    assert sent_tokens(first) <= THRESHOLD
    mw.wrap_model_call(first, Handler())
    tool_.description += " Results are ranked by relevance, newest first." * 120
    request = request_for(history, tools=[tool_])
    assert sent_tokens(request) > THRESHOLD
    handler, fresh = Handler(), Handler()
    mw.wrap_model_call(request, handler)
    middleware(DIGEST).wrap_model_call(request, fresh)
    assert sent_tokens(handler.requests[0]) <= THRESHOLD
    assert handler.requests[0].messages == fresh.requests[0].messages


@given(tool_description_edits(), st.integers(1, 5), st.integers(0, len(PROSE)))
def test_the_request_stays_within_the_threshold_as_tool_schemas_change(
    edits: ToolEdits, units: int, extra: int
) -> None:
    """By the middleware's own estimate, after every edit, as a fresh middleware would send."""
    history = [*conversation(units), HumanMessage(PROSE[:extra] or "go on", id="next")]
    mw = middleware(DIGEST)
    for step, changes in enumerate(edits.steps):
        for change in changes:
            change(edits.tools)
        request = request_for(history, system="Be brief.", tools=list(edits.tools))
        handler, fresh = Handler(), Handler()
        mw.wrap_model_call(request, handler)
        middleware(DIGEST).wrap_model_call(request, fresh)
        (sent,) = handler.requests
        assert sent_tokens(sent) <= THRESHOLD, f"call {step}"
        assert sent.messages == fresh.requests[0].messages, f"call {step}"


# -- packaging --------------------------------------------------------------------------------


def test_only_the_middleware_module_imports_langchain_agents() -> None:
    package = Path(langchain_context_pipeline.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(n == "langchain.agents" or n.startswith("langchain.agents.") for n in names):
                importers.add(path.relative_to(package).as_posix())
    assert importers == {"integrations/middleware.py"}


def test_missing_langchain_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware.types", None)
    monkeypatch.delitem(sys.modules, "langchain_context_pipeline.middleware")
    monkeypatch.delitem(sys.modules, "langchain_context_pipeline.integrations.middleware")
    with pytest.raises(ImportError, match=r"pip install 'langchain-context-pipeline\[agents\]'"):
        importlib.import_module("langchain_context_pipeline.middleware")
