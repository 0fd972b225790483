"""Calibration from the provider's reported usage, and the retry on a context-length error."""
# ruff: noqa: RUF001

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import suppress
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
import quicktok
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from pydantic import Field, PrivateAttr

from langchain_context_pipeline import DIGEST
from langchain_context_pipeline.errors import BudgetError
from langchain_context_pipeline.langgraph import (
    ContextPipelineHook,
    HookMode,
    create_pre_model_hook,
)
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens.calibration import (
    CALIBRATION_STATE_KEY,
    MAX_CORRECTION,
    MAX_DECREASE,
    MIN_CORRECTION,
    SAFETY_MARGIN,
    Calibration,
    prefix_digests,
)
from langchain_context_pipeline.tokens.counters import MESSAGE_OVERHEAD_TOKENS, countable_parts
from langchain_context_pipeline.tokens.estimate import text_tokens
from langchain_context_pipeline.tokens.overflow import overflow_of
from tests.support.fakes import Call, ReplyingChatModel
from tests.support.strategies_loop import Turn, UsageRun, shaped_usage_runs, usage_runs

CL100K = quicktok.get_encoding("cl100k_base")
WINDOW = 16_000
SYSTEM = "你是一个谨慎的编程助手，请用中文回答。" * 20


def cl100k(text: str) -> int:
    """cl100k_base's count of ``text``; a lone surrogate as the JSON escape a request carries."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return len(CL100K.encode_ordinary(text))


def true_tokens(messages: list[BaseMessage]) -> int:
    total = 3
    for message in messages:
        texts, fixed = countable_parts(message)
        total += sum(map(cl100k, texts)) + fixed
        total += MESSAGE_OVERHEAD_TOKENS
    return total


def chinese_step(i: int) -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": f"docs/第{i}章.md"}, "id": f"c{i}"}
    text = f"第{i}章：上下文管道在每次调用模型之前压缩对话，保留任务和最近的消息。" * 25
    return [
        AIMessage(f"我来读第{i}章。", tool_calls=[call], id=f"a{i}"),
        ToolMessage(text, tool_call_id=f"c{i}", id=f"t{i}"),
    ]


class UsageHandler:
    """A model call that reports true cl100k input tokens, as a provider does."""

    def __init__(self, usage: Any = "true", fail: int = 0, fail_after: int = 0) -> None:
        self.usage = usage
        self.fail = fail
        self.fail_after = fail_after
        self.failing = False  # once a request failed, the next ones fail too (``fail`` in all)
        self.requests: list[ModelRequest[Any]] = []
        self.errors: list[Exception] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        sent = [request.system_message, *request.messages] if request.system_message else []
        tokens = true_tokens(sent)
        if self.fail and (self.failing or len(request.messages) > self.fail_after):
            self.fail -= 1
            self.failing = True
            error = RuntimeError(
                "Error code: 400 - {'error': {'code': 'context_length_exceeded', 'message': "
                f"\"This model's maximum context length is {WINDOW // 2} tokens. However, your "
                f'messages resulted in {tokens} tokens."}}}}'
            )
            self.errors.append(error)
            raise error
        reply = AIMessage("好的", response_metadata={"model_name": "fake"})
        if self.usage == "true":
            reply.usage_metadata = {
                "input_tokens": tokens,
                "output_tokens": 2,
                "total_tokens": tokens + 2,
            }
        elif self.usage is not None:
            reply.usage_metadata = {
                "input_tokens": self.usage,
                "output_tokens": 2,
                "total_tokens": 2,
            }
        return ModelResponse(result=[reply])


def record(out: Any, state: dict[str, Any]) -> float:
    """Apply the middleware's state update (if any) to ``state``; return the correction."""
    if isinstance(out, ExtendedModelResponse):
        assert out.command is not None
        state.update(out.command.update)  # type: ignore[arg-type]
    return Calibration.from_state(state.get(CALIBRATION_STATE_KEY)).correction


def request(messages: list[BaseMessage], state: dict[str, Any]) -> ModelRequest[Any]:
    return ModelRequest(
        model=GenericFakeChatModel(messages=iter([])),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(SYSTEM),
        tool_choice=None,
        tools=[],
        response_format=None,
        state={"messages": messages, **state},  # type: ignore[typeddict-item]
    )


def run_agent(steps: int, handler: UsageHandler) -> tuple[list[float], dict[str, Any]]:
    mw = ContextPipelineMiddleware(threshold=WINDOW, tail_budget=4000)
    messages: list[BaseMessage] = [HumanMessage("请阅读文档并总结。", id="task")]
    state: dict[str, Any] = {}
    corrections = []
    for i in range(steps):
        out = mw.wrap_model_call(request(messages, state), handler)
        corrections.append(record(out, state))
        messages = [*messages, *chinese_step(i)]
    return corrections, state


def test_sixty_steps_in_chinese_stay_within_the_window_by_the_true_count() -> None:
    handler = UsageHandler()
    corrections, _ = run_agent(60, handler)
    for n, sent in enumerate(handler.requests[1:], start=2):
        real = true_tokens([sent.system_message, *sent.messages])  # type: ignore[list-item]
        assert real <= WINDOW, f"call {n}: {real} > {WINDOW}"
    # After one reply the correction is the true ratio (within 5%), and it stays put.
    first = handler.requests[0]
    ratio = true_tokens([first.system_message, *first.messages]) / (  # type: ignore[list-item]
        ContextPipelineMiddleware(threshold=WINDOW).token_counter(
            [first.system_message, *first.messages]  # type: ignore[list-item]
        )
    )
    assert corrections[0] == pytest.approx(ratio, rel=0.05)
    assert corrections[0] != 1.0


@pytest.mark.parametrize("usage", [None, 0, -5, 1_000_000_000])
def test_missing_or_absurd_usage_changes_nothing_and_warns_once(
    usage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    corrections, state = run_agent(4, UsageHandler(usage=usage))
    assert corrections == [1.0] * 4
    assert CALIBRATION_STATE_KEY not in state
    assert caplog.text.count("token calibration") == 1


def test_usage_from_another_model_is_ignored() -> None:
    calibration = Calibration().sending(1000)
    reply = AIMessage(
        "x", response_metadata={"model_name": "claude-3-5", "model_provider": "anthropic"}
    )
    reply.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
    same, reason = calibration.observe(reply, ("openai", "gpt-4o"))
    assert same == calibration and reason is not None and reason.startswith("other model")
    moved, reason = calibration.observe(reply, ("anthropic", "claude-3-5"))
    assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)


@pytest.mark.parametrize(
    ("agent", "replied", "same"),
    [
        # A dated snapshot, a version or a tag of the agent's model: its own count.
        ("gpt-4", "gpt-4-0613", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),
        ("gpt-4.1", "gpt-4.1-2025-04-14", True),
        ("gemini-1.5-pro", "gemini-1.5-pro-002", True),
        ("llama3.1", "llama3.1:8b", True),
        ("mistral-large-latest", "mistral-large-2411", True),
        ("chatgpt-4o-latest", "chatgpt-4o-latest", True),
        ("gemini-flash-latest", "gemini-2.5-flash", True),
        # A name that only begins with the agent's is another model (gpt-4o counts with
        # o200k_base, gpt-4 with cl100k_base: its counts would mislead the budget).
        ("gpt-4", "gpt-4o-2024-08-06", False),
        ("gpt-4o", "gpt-4o-mini-2024-07-18", False),
        ("gpt-4o-mini", "gpt-4o", False),
        ("gpt-4.1", "gpt-4.1-mini-2025-04-14", False),
        ("o1", "o1-mini-2024-09-12", False),
        ("gemini-2.5-flash", "gemini-2.5-flash-lite", False),
        ("gemini-flash-latest", "gemini-2.5-flash-lite", False),
    ],
)
def test_a_reply_counts_for_the_agent_only_from_its_own_model(
    agent: str, replied: str, same: bool
) -> None:
    calibration = Calibration().sending(1000)
    reply = AIMessage("x", response_metadata={"model_name": replied, "model_provider": "openai"})
    reply.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
    moved, reason = calibration.observe(reply, ("openai", agent))
    if same:
        assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)
    else:
        assert moved == calibration and reason is not None and reason.startswith("other model")


def test_a_context_length_error_is_retried_once_within_a_smaller_budget() -> None:
    handler = UsageHandler(fail=1, fail_after=10)
    run_agent(12, handler)
    assert len(handler.errors) == 1 and len(handler.requests) == 13
    failed = next(i for i, r in enumerate(handler.requests) if len(r.messages) > 10)
    first, retry = handler.requests[failed], handler.requests[failed + 1]
    # The error reports a request within its window (as when room for the reply is
    # what ran out): the retry is smaller than the rejected request all the same.
    assert true_tokens(list(retry.messages)) < true_tokens(list(first.messages))
    assert true_tokens(list(retry.messages)) <= WINDOW // 2  # the window the error reported


def test_a_second_context_length_error_reaches_the_caller_unchanged() -> None:
    handler = UsageHandler(fail=2, fail_after=10)
    with pytest.raises(RuntimeError) as raised:
        run_agent(12, handler)
    assert raised.value is handler.errors[1]
    # The calls before, the rejected one and its one retry, then nothing.
    assert len(handler.requests) == 7 and len(handler.requests[5].messages) > 10


def test_with_no_room_to_shrink_into_the_error_reaches_the_caller_at_once() -> None:
    # The system prompt and the task alone: a retry could only send the same again.
    handler = UsageHandler(fail=2)
    with pytest.raises(RuntimeError) as raised:
        run_agent(1, handler)
    assert raised.value is handler.errors[0]
    assert len(handler.requests) == 1


def test_overflow_errors_are_recognised_and_read() -> None:
    openai = overflow_of(
        RuntimeError(
            "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens"
        )
    )
    assert openai is not None and (openai.window, openai.requested) == (8192, 9000)
    anthropic = overflow_of(RuntimeError("prompt is too long: 208000 tokens > 200000 maximum"))
    assert anthropic is not None and (anthropic.window, anthropic.requested) == (200000, 208000)
    assert overflow_of(RuntimeError("rate limited")) is None
    from langchain_core.exceptions import ContextOverflowError

    bare = overflow_of(ContextOverflowError("too big"))
    assert bare is not None and bare.window is None


def reply_reporting(tokens: int) -> AIMessage:
    reply = AIMessage("好的")
    reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
    return reply


@given(st.lists(st.tuples(st.integers(1, 200_000), st.floats(0.1, 5.0)), min_size=1, max_size=12))
def test_the_correction_is_bounded_and_comes_down_slowly(
    calls: list[tuple[int, float]],
) -> None:
    calibration = Calibration()
    for sent, ratio in calls:
        before = calibration
        calibration, _ = calibration.sending(sent).observe(reply_reporting(round(sent * ratio)))
        assert MIN_CORRECTION <= calibration.correction <= MAX_CORRECTION
        if before.samples:  # the first measurement replaces the default at once
            assert calibration.correction >= before.correction * (1 - MAX_DECREASE) - 1e-12


def test_a_compressed_request_does_not_loosen_the_budget_for_the_raw_history() -> None:
    # Raw Chinese measured 3.3 provider tokens per counted token; the next request,
    # briefs and a summary, measures 2.9. The raw history may come back next call.
    raw, _ = Calibration().sending(1000).observe(reply_reporting(3300))
    briefs, _ = raw.sending(1000).observe(reply_reporting(2900))
    assert briefs.correction == pytest.approx(3.3 * SAFETY_MARGIN * (1 - MAX_DECREASE))
    assert briefs.correction > 0.99 * 3.3 > 2.9 * SAFETY_MARGIN  # not the briefs' ratio


@given(
    sent=st.integers(2, 500_000),
    threshold=st.integers(1_000, 1_000_000),
    correction=st.floats(MIN_CORRECTION, MAX_CORRECTION),
    requested=st.none() | st.integers(1, 2_000_000),
    window=st.none() | st.integers(1, 1_000_000),
)
def test_the_retry_is_smaller_than_the_rejected_request_and_its_budget(
    sent: int, threshold: int, correction: float, requested: int | None, window: int | None
) -> None:
    rejected = Calibration(correction=correction).sending(sent)
    budget = rejected.retry_budget(threshold, requested, window)
    assert 1 <= budget < sent
    assert budget <= rejected.budget(threshold)
    if requested and window and requested > window:  # at least the reported overshoot
        assert budget <= max(1, sent * window / requested)


# -- async: the middleware's awrap_model_call ---------------------------------------------


async def arun_agent(steps: int, handler: UsageHandler) -> tuple[list[float], dict[str, Any]]:
    """:func:`run_agent` through ``awrap_model_call`` with an async handler."""
    mw = ContextPipelineMiddleware(threshold=WINDOW, tail_budget=4000)
    messages: list[BaseMessage] = [HumanMessage("请阅读文档并总结。", id="task")]
    state: dict[str, Any] = {}
    corrections = []

    async def ahandler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return handler(request)

    for i in range(steps):
        out = await mw.awrap_model_call(request(messages, state), ahandler)
        corrections.append(record(out, state))
        messages = [*messages, *chinese_step(i)]
    return corrections, state


async def test_async_sixty_steps_calibrate_as_the_sync_path_does() -> None:
    handler = UsageHandler()
    corrections, state = await arun_agent(60, handler)
    for n, sent in enumerate(handler.requests[1:], start=2):
        real = true_tokens([sent.system_message, *sent.messages])  # type: ignore[list-item]
        assert real <= WINDOW, f"call {n}: {real} > {WINDOW}"
    assert corrections[0] != 1.0
    sync_handler = UsageHandler()
    sync_corrections, sync_state = run_agent(60, sync_handler)
    assert corrections == sync_corrections and state == sync_state
    assert [list(r.messages) for r in handler.requests] == [
        list(r.messages) for r in sync_handler.requests
    ]


@pytest.mark.parametrize("usage", [None, 0, -5, 1_000_000_000])
async def test_async_missing_or_absurd_usage_changes_nothing_and_warns_once(
    usage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    corrections, state = await arun_agent(4, UsageHandler(usage=usage))
    assert corrections == [1.0] * 4
    assert CALIBRATION_STATE_KEY not in state
    assert caplog.text.count("token calibration") == 1


async def test_async_context_length_error_is_retried_once_within_a_smaller_budget() -> None:
    handler = UsageHandler(fail=1, fail_after=10)
    await arun_agent(12, handler)
    assert len(handler.errors) == 1 and len(handler.requests) == 13
    failed = next(i for i, r in enumerate(handler.requests) if len(r.messages) > 10)
    first, retry = handler.requests[failed], handler.requests[failed + 1]
    assert true_tokens(list(retry.messages)) < true_tokens(list(first.messages))
    assert true_tokens(list(retry.messages)) <= WINDOW // 2


async def test_async_second_context_length_error_reaches_the_caller_unchanged() -> None:
    handler = UsageHandler(fail=2, fail_after=10)
    with pytest.raises(RuntimeError) as raised:
        await arun_agent(12, handler)
    assert raised.value is handler.errors[1]
    assert len(handler.requests) == 7 and len(handler.requests[5].messages) > 10


async def test_async_with_no_room_to_shrink_into_the_error_reaches_the_caller_at_once() -> None:
    handler = UsageHandler(fail=2)
    with pytest.raises(RuntimeError) as raised:
        await arun_agent(1, handler)
    assert raised.value is handler.errors[0]
    assert len(handler.requests) == 1


# -- through the LangGraph pre-model hook -------------------------------------------------

react_agent_warning = pytest.mark.filterwarnings(
    "ignore:create_react_agent has been moved:DeprecationWarning"
)


@tool
def read_chapter(path: str) -> str:
    """读取文档的一章。"""
    return f"{path}：上下文管道在每次调用模型之前压缩对话，保留任务和最近的消息。" * 25


HOOK_TOOLS: list[BaseTool] = [read_chapter]
TASK = "请阅读文档并总结。"
COUNTERS: dict[str, Any] = {
    # The content-aware estimate counts Chinese high; LangChain's chars/4 counts it
    # about 3.7 times low: without calibration its budget would be far past the window.
    "estimate": None,
    "chars/4": count_tokens_approximately,
}


def schema_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """The true cl100k tokens of the tool schemas a request carries."""
    return len(CL100K.encode_ordinary(json.dumps(list(tools), ensure_ascii=False))) if tools else 0


class ChatTrueUsage(ReplyingChatModel):
    """Reads one chapter a call for ``steps`` calls, then answers.

    Every reply reports in ``usage_metadata["input_tokens"]`` the true cl100k count of
    all it was sent: system prompt, messages and tool schemas. ``usage`` makes it
    report nothing (``None``), a fixed count, or (``"other"``) the true count under
    another provider's name.
    """

    llm_type = "true-usage"
    model_name: str = "stub-cl100k"
    steps: int = 60
    start: int = 0
    usage: Any = "true"
    requests: list[tuple[list[BaseMessage], int]] = Field(default_factory=list)
    _calls: int = PrivateAttr(default=0)

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        tokens = true_tokens(messages) + schema_tokens(call.kwargs.get("tools") or [])
        self.requests.append((list(messages), tokens))
        step = self.start + self._calls
        self._calls += 1
        if step >= self.steps:
            reply = AIMessage("全部读完了：每一章都讲上下文管道。")
        else:
            tool_call = {
                "name": "read_chapter",
                "args": {"path": f"docs/第{step}章.md"},
                "id": f"c{step}",
                "type": "tool_call",
            }
            reply = AIMessage(f"我来读第{step}章。", tool_calls=[tool_call])
        other = self.usage == "other"
        reply.response_metadata = {
            "model_provider": "anthropic" if other else "trueusage",
            "model_name": "claude-sonnet-4" if other else self.model_name,
        }
        count = tokens if self.usage in ("true", "other") else self.usage
        if count is not None:
            reply.usage_metadata = {
                "input_tokens": count,
                "output_tokens": 8,
                "total_tokens": count + 8,
            }
        return reply


def hook_agent(model: ChatTrueUsage, counter: Any, checkpointer: Any) -> tuple[Any, Any]:
    """A ``create_react_agent`` graph with the hook, told the prompt and tools it sends."""
    hook = create_pre_model_hook(
        threshold=WINDOW,
        tail_budget=4000,
        model=DIGEST,
        token_counter=counter,
        agent_model=model,
        system_prompt=SYSTEM,
        tools=HOOK_TOOLS,
    )
    agent = create_react_agent(
        model, HOOK_TOOLS, prompt=SYSTEM, pre_model_hook=hook, checkpointer=checkpointer
    )
    return agent, hook


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}, "recursion_limit": 1000}


def used_corrections(snapshots: Sequence[Any]) -> list[float]:
    """The correction each model call was budgeted with, oldest first.

    Read from the checkpoints taken between the hook and the model: the hook's
    update is in graph state there.
    """
    return [
        Calibration.from_state(s.values.get(CALIBRATION_STATE_KEY)).correction
        for s in reversed(snapshots)
        if s.next == ("agent",)
    ]


def counted(hook: Any, messages: list[BaseMessage]) -> int:
    """What a request costs by the hook's counter: messages, system prompt and tools."""
    schemas = [convert_to_openai_tool(t) for t in HOOK_TOOLS]
    text = json.dumps(schemas, ensure_ascii=False, sort_keys=True)
    counter = hook.pipeline.token_counter
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    return int(counter(rest) + counter([SystemMessage(SYSTEM)]) + counter([SystemMessage(text)]))


def assert_calibrated_run(
    model: ChatTrueUsage, hook: Any, corrections: list[float], counter: str
) -> None:
    """Every call from the second on fits the window; each reply sets the next correction."""
    assert len(corrections) == len(model.requests) == 61
    for n, (_, tokens) in enumerate(model.requests[1:], start=2):
        assert tokens <= WINDOW, f"call {n}: {tokens} true tokens > {WINDOW}"
    assert corrections[0] == 1.0
    ratios = [tokens / counted(hook, messages) for messages, tokens in model.requests]
    # One reply is enough: the second call uses the first call's ratio (within 5%,
    # the safety margin included), and no call uses less than its previous call's.
    assert corrections[1] == pytest.approx(ratios[0], rel=0.05)
    assert corrections[1] != 1.0
    for n, (correction, ratio) in enumerate(
        zip(corrections[1:], ratios[:-1], strict=True), start=2
    ):
        assert correction >= ratio, f"call {n}"
    if counter == "estimate":
        # A counter that follows the content: every call's correction is its previous
        # call's ratio with the safety margin, within 5%.
        for n, (correction, ratio) in enumerate(
            zip(corrections[1:], ratios[:-1], strict=True), start=2
        ):
            assert correction == pytest.approx(ratio * SAFETY_MARGIN, rel=0.05), f"call {n}"
    # Sixty chapters are several windows: the window, not the run, bounded the calls.
    chapter = len(CL100K.encode_ordinary(read_chapter.invoke({"path": "docs/第1章.md"})))
    assert 60 * chapter > 3 * WINDOW


@react_agent_warning
@pytest.mark.parametrize("counter", list(COUNTERS))
def test_hook_sixty_steps_in_chinese_stay_within_the_window_by_the_true_count(
    counter: str, tmp_path: Path
) -> None:
    model = ChatTrueUsage()
    with sqlite3.connect(tmp_path / "graph.sqlite", check_same_thread=False) as conn:
        agent, hook = hook_agent(model, COUNTERS[counter], SqliteSaver(conn))
        agent.invoke({"messages": [HumanMessage(TASK)]}, thread("run"))
        corrections = used_corrections(list(agent.get_state_history(thread("run"))))
    assert_calibrated_run(model, hook, corrections, counter)


@react_agent_warning
@pytest.mark.parametrize("counter", list(COUNTERS))
async def test_hook_async_sixty_steps_stay_within_the_window_by_the_true_count(
    counter: str, tmp_path: Path
) -> None:
    model = ChatTrueUsage()
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.sqlite")) as saver:
        agent, hook = hook_agent(model, COUNTERS[counter], saver)
        await agent.ainvoke({"messages": [HumanMessage(TASK)]}, thread("run"))
        snapshots = [s async for s in agent.aget_state_history(thread("run"))]
    assert_calibrated_run(model, hook, used_corrections(snapshots), counter)


@react_agent_warning
@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("usage", [None, "other", 0, -5, 1_000_000_000])
async def test_hook_ignores_missing_foreign_or_absurd_usage_and_warns_once(
    usage: Any, path: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ChatTrueUsage(steps=6, usage=usage)
    with sqlite3.connect(tmp_path / "graph.sqlite", check_same_thread=False) as conn:
        agent, _ = hook_agent(model, None, SqliteSaver(conn))
        if path == "sync":
            agent.invoke({"messages": [HumanMessage(TASK)]}, thread("run"))
        else:
            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
                agent, _ = hook_agent(model, None, saver)
                await agent.ainvoke({"messages": [HumanMessage(TASK)]}, thread("run"))
                snapshots = [s async for s in agent.aget_state_history(thread("run"))]
        if path == "sync":
            snapshots = list(agent.get_state_history(thread("run")))
    assert used_corrections(snapshots) == [1.0] * 7
    assert caplog.text.count("token calibration") == 1


def test_hook_learns_from_the_first_reply_after_the_request_it_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = create_pre_model_hook(threshold=WINDOW)
    stale = AIMessage("旧的回答", id="old")
    stale.usage_metadata = {"input_tokens": 900, "output_tokens": 1, "total_tokens": 901}
    recorded = {"correction": 1.0, "sent": 100, "after": "asked", "samples": 0}
    history = [HumanMessage("你好", id="first"), stale, HumanMessage("请继续。", id="asked")]

    def correction(messages: list[BaseMessage]) -> float:
        update = hook.invoke({"messages": messages, CALIBRATION_STATE_KEY: recorded})
        return Calibration.from_state(update[CALIBRATION_STATE_KEY]).correction

    # No reply after the recorded request yet: an older reply's usage is not its.
    with caplog.at_level(logging.WARNING):
        assert correction(history) == 1.0
    assert "no reply: the reply to the request last sent was not found" in caplog.text
    reply = AIMessage("好的", id="reply")
    reply.usage_metadata = {"input_tokens": 150, "output_tokens": 1, "total_tokens": 151}
    later = AIMessage("还有", id="later")
    later.usage_metadata = {"input_tokens": 300, "output_tokens": 1, "total_tokens": 301}
    assert correction([*history, reply, HumanMessage("再见", id="bye"), later]) == (
        pytest.approx(1.5 * 1.03)
    )


@react_agent_warning
def test_hook_calibration_lives_in_graph_state_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    undercount = COUNTERS["chars/4"]
    first = ChatTrueUsage(steps=30)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        agent, _ = hook_agent(first, undercount, SqliteSaver(conn))
        agent.invoke({"messages": [HumanMessage(TASK)]}, thread("resume"))
    conn.close()

    # A new process: a new model, hook and graph on the same file.
    model = ChatTrueUsage(start=30, steps=60)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        agent, hook = hook_agent(model, undercount, SqliteSaver(conn))
        resumed = agent.get_state(thread("resume")).values
        stored = Calibration.from_state(resumed[CALIBRATION_STATE_KEY])
        assert stored.correction > 2 and stored.sent > 0  # chars/4 counts Chinese low
        go_on = HumanMessage("请继续。", id="continue")
        agent.invoke({"messages": [go_on]}, thread("resume"))
        snapshots = list(agent.get_state_history(thread("resume")))
    conn.close()

    corrections = used_corrections(snapshots)
    assert len(corrections) == 31 + 31
    # The first call after the restart learned from the reply before it, as it would have
    # without the restart, and every call of the resumed run fits the window.
    last_reply = resumed["messages"][-1]
    assert isinstance(last_reply, AIMessage) and last_reply.usage_metadata
    expected, ignored = stored.observe(last_reply, hook.agent)
    assert ignored is None and expected.samples == stored.samples + 1
    assert corrections[31] == pytest.approx(expected.correction)
    assert all(tokens <= WINDOW for _, tokens in model.requests)
    # Control: the same hook on the same state without the stored calibration sends
    # far more than the window.
    fresh = hook_agent(ChatTrueUsage(), undercount, None)[1]
    blind = {k: v for k, v in resumed.items() if k != CALIBRATION_STATE_KEY}
    sent = fresh.invoke({**blind, "messages": [*resumed["messages"], go_on]})
    assert true_tokens([SystemMessage(SYSTEM), *sent["llm_input_messages"]]) > WINDOW
    assert isinstance(fresh, ContextPipelineHook)


@pytest.mark.parametrize("entry", ["middleware", "hook"])
def test_a_correction_that_budgets_a_call_under_the_tail_budget_shrinks_the_tail(
    entry: str,
) -> None:
    # threshold 8,000 with an explicit tail of 3,000; the provider counts four times
    # what the counter does, so this call's budget is 2,000: under the tail.
    calibration = {"correction": MAX_CORRECTION, "sent": 0, "after": None, "samples": 3}
    messages: list[BaseMessage] = [HumanMessage("请阅读文档并总结。", id="task")]
    for i in range(12):
        messages += chinese_step(i)
    if entry == "middleware":
        mw = ContextPipelineMiddleware(threshold=8000, tail_budget=3000)
        handler = UsageHandler(usage=None)
        mw.wrap_model_call(request(messages, {CALIBRATION_STATE_KEY: calibration}), handler)
        sent = [handler.requests[0].system_message, *handler.requests[0].messages]
        assert mw.token_counter(sent) <= 8000 / MAX_CORRECTION  # type: ignore[arg-type]
    else:
        hook = create_pre_model_hook(threshold=8000, tail_budget=3000)
        update = hook.invoke({"messages": messages, CALIBRATION_STATE_KEY: calibration})
        assert hook.pipeline.token_counter(update["llm_input_messages"]) <= 8000 / MAX_CORRECTION


# -- reported usage plus an estimate of what changed --------------------------------------

MIXED_THRESHOLD = 2_500
ENGLISH_TASK = (
    "Please summarize the following information in a concise way so that everyone "
    "understands what happened yesterday, comparing the four data files the service "
    "wrote overnight. "
) * 40


def mixed_output(kind: str, step: int) -> str:
    """Tool output the content-aware estimate counts close to cl100k (dense, not prose)."""
    draw = random.Random(step)
    if kind == "hex":
        return draw.randbytes(200).hex()
    if kind == "cjk":
        return f"第{step}号服务在夜间任务中写入了数据，上下文管道保留任务和最近的消息。" * 8
    if kind == "base64":
        return base64.b64encode(draw.randbytes(1080)).decode()
    rows = [{"id": draw.getrandbits(40), "token": draw.randbytes(12).hex()} for _ in range(8)]
    return json.dumps({"rows": rows, "step": step})


KINDS = ("base64", "hex", "base64", "cjk", "base64", "json")


@tool
def read_data(name: str) -> str:
    """Read one of the service's data files."""
    kind, _, step = name.partition("-")
    return mixed_output(kind, int(step))


class ChatMixedUsage(ReplyingChatModel):
    """Reads a data file of each kind in turn, reporting every request's true cl100k count."""

    llm_type = "mixed-usage"
    model_name: str = "stub-cl100k"
    steps: int = 40
    reported: list[int] = Field(default_factory=list)

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        tokens = true_tokens(messages) + schema_tokens(call.kwargs.get("tools") or [])
        self.reported.append(tokens)
        step = len(self.reported) - 1
        if step >= self.steps:
            reply = AIMessage("The files changed; the job ran out of disk.")
        else:
            name = f"{KINDS[step % len(KINDS)]}-{step}"
            reply = AIMessage(
                f"Reading {name}.",
                tool_calls=[{"name": "read_data", "args": {"name": name}, "id": f"r{step}"}],
            )
        reply.response_metadata = {"model_provider": "mixedusage", "model_name": self.model_name}
        reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 8, "total_tokens": tokens}
        return reply


def mixed_agent(model: ChatMixedUsage) -> Any:
    from langchain.agents import create_agent

    middleware = ContextPipelineMiddleware(threshold=MIXED_THRESHOLD, model=DIGEST)
    return create_agent(
        model, [read_data], system_prompt="You are a careful assistant.", middleware=[middleware]
    )


def assert_mixed_run(model: ChatMixedUsage) -> None:
    assert len(model.reported) == model.steps + 1
    # The English task made the estimate look high: the budget must not carry that
    # over to the dense output that follows.
    assert max(model.reported) > MIXED_THRESHOLD * 0.6  # the window was used
    for n, tokens in enumerate(model.reported, start=1):
        assert tokens <= MIXED_THRESHOLD, f"call {n}: {tokens} reported > {MIXED_THRESHOLD}"


def test_create_agent_never_sends_more_than_the_threshold_by_the_providers_count() -> None:
    model = ChatMixedUsage()
    mixed_agent(model).invoke({"messages": [HumanMessage(ENGLISH_TASK)]}, {"recursion_limit": 200})
    assert_mixed_run(model)


async def test_async_create_agent_never_sends_more_than_the_threshold() -> None:
    model = ChatMixedUsage()
    await mixed_agent(model).ainvoke(
        {"messages": [HumanMessage(ENGLISH_TASK)]}, {"recursion_limit": 200}
    )
    assert_mixed_run(model)


class TrueUsage:
    """A provider stub: every reply reports the request's true cl100k count.

    It spies on the middleware's pipeline too, to know whether the request it is
    sent is the smallest valid one (over by the pipeline's own count, with a warning).
    """

    def __init__(self, mw: ContextPipelineMiddleware) -> None:
        self.sent: list[tuple[int, int]] = []  # (true tokens, tokens over budget)
        self.over = 0
        compress, acompress = mw.pipeline.compress, mw.pipeline.acompress

        def spy(*args: Any, **kwargs: Any) -> Any:
            result = compress(*args, **kwargs)
            self.over = result.report.over_budget
            return result

        async def aspy(*args: Any, **kwargs: Any) -> Any:
            result = await acompress(*args, **kwargs)
            self.over = result.report.over_budget
            return result

        mw.pipeline.compress = spy  # type: ignore[method-assign]
        mw.pipeline.acompress = aspy  # type: ignore[method-assign]

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent = [request.system_message, *request.messages] if request.system_message else []
        tokens = true_tokens(sent)  # type: ignore[arg-type]
        self.sent.append((tokens, self.over))
        reply = AIMessage("ok", response_metadata={"model_name": "fake"})
        reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens}
        return ModelResponse(result=[reply])


def usage_turns(run: UsageRun) -> Iterator[list[BaseMessage]]:
    """The history before each model call: the task, then each turn's messages added."""
    history: list[BaseMessage] = [HumanMessage(run.task)]
    yield history
    for turn in run.turns:
        for edit in turn.edits:
            edit(history)
        history = [*history, *turn.messages]
        yield history


def assert_within_threshold(run: UsageRun, stub: TrueUsage) -> None:
    threshold = run.settings["threshold"]
    for n, (tokens, over) in enumerate(stub.sent, start=1):
        # Over budget only when the must-keep part alone exceeds it: the middleware
        # then sends the smallest valid request, with a warning.
        if not over:
            assert tokens <= threshold, f"call {n}: {tokens} true tokens > {threshold}"


def middleware_usage_run(run: UsageRun) -> None:
    """Drive the middleware turn by turn over ``run``, every reply reporting true usage,
    and assert that no request it could budget passed the threshold."""
    run = deepcopy(run)
    mw = ContextPipelineMiddleware(**run.settings)
    stub, state = TrueUsage(mw), {}
    for history in usage_turns(run):
        record(mw.wrap_model_call(request(history, state), stub), state)
    assert_within_threshold(run, stub)


@given(usage_runs())
def test_reported_usage_never_lets_a_request_past_the_threshold(run: UsageRun) -> None:
    middleware_usage_run(run)


@given(usage_runs())
def test_async_reported_usage_never_lets_a_request_past_the_threshold(run: UsageRun) -> None:
    run = deepcopy(run)
    mw = ContextPipelineMiddleware(**run.settings)
    stub, state = TrueUsage(mw), {}

    async def handler(r: ModelRequest[Any]) -> ModelResponse[Any]:
        return stub(r)

    async def drive() -> None:
        for history in usage_turns(run):
            record(await mw.awrap_model_call(request(history, state), handler), state)

    asyncio.run(drive())
    assert_within_threshold(run, stub)


@react_agent_warning
@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_hook_never_sends_more_than_the_threshold_by_the_providers_count(
    mode: HookMode, tmp_path: Path
) -> None:
    model = ChatMixedUsage()
    prompt = "You are a careful assistant."
    hook = create_pre_model_hook(
        threshold=MIXED_THRESHOLD,
        model=DIGEST,
        agent_model=model,
        system_prompt=prompt,
        tools=[read_data],
        mode=mode,
    )
    with sqlite3.connect(tmp_path / "agent.db", check_same_thread=False) as conn:
        agent = create_react_agent(
            model, [read_data], prompt=prompt, pre_model_hook=hook, checkpointer=SqliteSaver(conn)
        )
        agent.invoke({"messages": [HumanMessage(ENGLISH_TASK)]}, thread("mixed"))
        saved = agent.get_state(thread("mixed")).values
    assert_mixed_run(model)
    # The checkpointed record holds spans the provider counted, in both modes.
    assert Calibration.from_state(saved.get(CALIBRATION_STATE_KEY)).counted


def test_a_counted_prefix_is_budgeted_at_its_count_and_the_rest_at_the_estimate() -> None:
    messages: list[BaseMessage] = [HumanMessage("task " * 50), AIMessage("ok " * 30)]
    digests = prefix_digests("seed", messages)
    # The provider counted the first message at 40 where the counter said 70.
    record = Calibration(correction=0.6, counted=((1, digests[1], 70, 40),))
    assert record.fitting_budget(1_000, digests) == 70 + (1_000 - 40)
    assert record.first_budget(1_000) == 1_030
    # The output no longer repeats it (compaction replaced it): no credit, and a
    # correction below 1 never enlarges what the provider did not count.
    other = prefix_digests("seed", [HumanMessage("summary"), *messages[1:]])
    assert record.fitting_budget(1_000, other) == record.budget(1_000) == 1_000
    assert record.refit(1_000, 1_030, 1_010, other) == 1_000
    assert record.refit(1_000, 1_030, 1_010, digests) is None
    # Another system prompt or tools: another seed, no prefix trusted.
    assert record.fitting_budget(1_000, prefix_digests("other", messages)) == 1_000
    # A counter measured low still scales up what the provider never saw.
    low = Calibration(correction=2.0, counted=((1, digests[1], 70, 140),))
    assert low.fitting_budget(1_000, digests) == 70 + (1_000 - 140) // 2
    assert low.budget(1_000) == 500


def test_an_edit_in_place_breaks_the_prefix_from_the_edited_message_on() -> None:
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}
    messages: list[BaseMessage] = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("data", tool_call_id="c1"),
    ]
    before = prefix_digests("seed", messages)
    edited = deepcopy(messages)
    edited[1].tool_calls[0]["args"]["path"] = "b.py"  # type: ignore[attr-defined]
    after = prefix_digests("seed", edited)
    assert before[:2] == after[:2] and before[2] != after[2] and before[3] != after[3]
    odd = [AIMessage("", tool_calls=[{**call, "args": {"k": {1: {2, 3}, "a": b"x"}}}])]
    assert prefix_digests("seed", odd) == prefix_digests("seed", deepcopy(odd))


@pytest.mark.parametrize("edit", ["legacy function call", "invalid tool call"])
def test_a_cut_the_counter_sees_breaks_the_prefix(edit: str) -> None:
    # What the counter counts of a message, the digest reads: a legacy function call
    # sits in additional_kwargs, an invalid call beside the tool calls. Blind to them,
    # a digest took a message whose arguments pruning had cut for the one the
    # provider counted.
    args = json.dumps({"query": "x" * 400})
    if edit == "legacy function call":
        message = AIMessage(
            "", additional_kwargs={"function_call": {"name": "f", "arguments": args}}
        )
        cut = deepcopy(message)
        cut.additional_kwargs["function_call"]["arguments"] = args[:40]
    else:
        bad = {"name": "f", "args": args, "id": "c1", "error": None, "type": "invalid_tool_call"}
        message = AIMessage("", invalid_tool_calls=[bad])  # type: ignore[list-item]
        cut = deepcopy(message)
        cut.invalid_tool_calls[0]["args"] = args[:40]
    assert sum(map(len, countable_parts(cut)[0])) < sum(map(len, countable_parts(message)[0]))
    before = prefix_digests("seed", [HumanMessage("task"), message])
    after = prefix_digests("seed", [HumanMessage("task"), cut])
    assert before[:2] == after[:2] and before[2] != after[2]


NESTED = '{"tree": ' + '[{"a": ' * 28 + '["leaf"]' + "}]" * 28 + "}"
"""Arguments the estimate charges about twice what cl100k_base counts (marks)."""


def _legacy_call_run(threshold: int) -> UsageRun:
    """A legacy function call with nested arguments, then two tool turns with an image:
    the call's arguments are cut once it leaves the tail, after the provider counted it."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    turns = [
        Turn(
            [
                AIMessage(
                    "", additional_kwargs={"function_call": {"name": "search", "arguments": NESTED}}
                ),
                FunctionMessage("", name="search"),
            ]
        )
    ]
    for n in (1, 2):
        call = {"name": "read_file", "args": {"path": "a"}, "id": f"s{n}"}
        turns.append(
            Turn(
                [
                    AIMessage("", tool_calls=[call]),
                    ToolMessage([{"type": "text", "text": ""}, image], tool_call_id=f"s{n}"),
                ]
            )
        )
    task = "Please summarize what happened yesterday, in a concise way. " * 6
    return UsageRun(task, turns, {"threshold": threshold, "head_count": 1, "model": None})


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_a_counted_call_cut_later_is_not_credited_at_its_old_count(mode: HookMode) -> None:
    # The provider counts a request holding a legacy function call whole; at the next
    # request pruning cuts its arguments. Read as the counted message, the cut was
    # credited at what the estimate saved (about twice what the provider saves), and
    # at thresholds from 2,169 the hook sent up to 2,228 cl100k_base tokens.
    over = []
    for threshold in range(1_700, 2_600, 7):
        sent = hook_usage_loop(_legacy_call_run(threshold), mode)
        over += [(threshold, tokens) for tokens in sent if tokens > threshold]
    assert over == []


def test_the_record_round_trips_through_state_and_drops_malformed_entries() -> None:
    record = Calibration(0.8, 10, "m1", 2, (3, "abc"), ((1, "x", 5, 4),), 900)
    assert Calibration.from_state(record.to_dict()) == record
    broken = {**record.to_dict(), "counted": [[1, "x", -5, 4], "junk", [1, 2, 3, 4]]}
    assert Calibration.from_state(broken).counted == ()
    for pending in ([3], [3, 5], [-1, "abc"], "ab", None):
        assert Calibration.from_state({**record.to_dict(), "pending": pending}).pending is None


def hook_usage_loop(run: UsageRun, mode: HookMode = "ephemeral") -> list[int]:
    """Drive the hook turn by turn as an agent's model node would.

    Each turn's AIMessage is the reply to the request the hook made before it, and
    reports that request's true count (system prompt included), as a provider does;
    the hook's state update is applied between calls (in persist mode by
    ``add_messages``, which the mode needs, as a graph applies it). Returns the true
    counts of the requests the hook made whose budget it could meet; a persist run
    ends where the hook refuses to rewrite the history to what cannot fit.
    """
    hook = create_pre_model_hook(
        **run.settings, agent_model="stub-cl100k", system_prompt=SYSTEM, tail_budget=500, mode=mode
    )
    reports: list[Any] = []
    compress = hook.pipeline.compress

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = compress(*args, **kwargs)
        reports.append(result.report)
        return result

    hook.pipeline.compress = spy  # type: ignore[method-assign]
    persist = mode == "persist"
    state: dict[str, Any] = {"messages": [HumanMessage(run.task)]}
    sent: list[int] = []
    for turn in run.turns:
        try:
            update = hook.invoke(state)
        except BudgetError:
            if not persist:
                raise
            break
        if persist:
            state["messages"] = add_messages(state["messages"], update.pop("messages", []))
            request = state["messages"]
        else:
            request = update.pop("llm_input_messages")
        tokens = true_tokens([SystemMessage(SYSTEM), *request])
        if not reports[-1].over_budget:
            sent.append(tokens)
        state.update(update)
        for edit in turn.edits:
            with suppress(IndexError):  # persisted, the history may be shorter now
                edit(state["messages"])
        reply, *results = turn.messages
        reply = reply.model_copy(
            update={
                "usage_metadata": {
                    "input_tokens": tokens,
                    "output_tokens": 1,
                    "total_tokens": tokens,
                },
                "response_metadata": {"model_name": "stub-cl100k"},
            }
        )
        new = [reply, *results]
        state["messages"] = (
            add_messages(state["messages"], new) if persist else [*state["messages"], *new]
        )
    return sent


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
@given(run=usage_runs())
def test_hook_with_reported_usage_never_lets_a_request_past_the_threshold(
    mode: HookMode, run: UsageRun
) -> None:
    """With ids or without (a list reducer, a hand-built state), each reply is read as the
    reply to the request before it: a reply taken for another's would credit a prefix
    with a count the provider never gave it. Persisted, the request is the rewritten
    history, which the reply follows."""
    run = deepcopy(run)
    threshold = run.settings["threshold"]
    for n, tokens in enumerate(hook_usage_loop(run, mode), start=1):
        assert tokens <= threshold, f"call {n}: {tokens} true tokens > {threshold}"


def estimate_bounds(run: UsageRun) -> bool:
    """Whether the content-aware estimate is at least cl100k's count of every text of ``run``.

    Text that repeats one short unit (``"src/app.py" * 200``) can be estimated under its
    count, a measured limit of the estimate (``tokens/estimate.py``, "Repetition"),
    tested with the estimate; the properties below are about what calibration and the
    pipeline make of an estimate that bounds what it is given.
    """
    texts = (t for turn in run.turns for m in turn.messages for t in countable_parts(m)[0])
    return all(text_tokens(t) >= cl100k(t) for t in texts)


FILTERING = settings(
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ]
)


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
@FILTERING
@given(run=shaped_usage_runs())
def test_provider_shaped_turns_with_reported_usage_never_pass_the_threshold(
    mode: HookMode, run: UsageRun
) -> None:
    """Tool turns as Anthropic, the Responses API, custom and computer tools and legacy
    function calls send them, with dense results: the hook, in both modes, reads each
    reply's usage and never lets a request it could budget past the threshold."""
    assume(estimate_bounds(run))
    run = deepcopy(run)
    threshold = run.settings["threshold"]
    for n, tokens in enumerate(hook_usage_loop(run, mode), start=1):
        assert tokens <= threshold, f"call {n}: {tokens} true tokens > {threshold}"


@FILTERING
@given(run=shaped_usage_runs())
def test_the_middleware_with_provider_shaped_turns_never_passes_the_threshold(
    run: UsageRun,
) -> None:
    assume(estimate_bounds(run))
    middleware_usage_run(run)


NIGHTLY = (
    "The nightly job wrote the new records to the service's store and then checked the "
    "free disk space on every node before it reported back to the operators. "
)


def persist_sizes(usage: bool, turns: int = 24) -> tuple[list[int], int]:
    """The true size of each request a persist hook lets through, and how often it rewrote."""
    hook = create_pre_model_hook(
        threshold=4_000, tail_budget=1_000, model=DIGEST, mode="persist", agent_model="stub"
    )
    state: dict[str, Any] = {"messages": [HumanMessage(ENGLISH_TASK[:1_500], id="task")]}
    sizes, rewrites = [], 0
    for i in range(turns):
        update = hook.invoke(state)
        rewrites += "messages" in update
        state["messages"] = add_messages(state["messages"], update.pop("messages", []))
        state.update(update)
        sizes.append(true_tokens(state["messages"]))
        call = {"name": "read_file", "args": {"path": f"notes/{i}.md"}, "id": f"c{i}"}
        reply = AIMessage(
            f"Reading notes {i}.",
            tool_calls=[call],
            id=f"a{i}",
            response_metadata={"model_name": "stub"},
        )
        if usage:
            reply.usage_metadata = {
                "input_tokens": sizes[-1],
                "output_tokens": 1,
                "total_tokens": sizes[-1] + 1,
            }
        result = ToolMessage(NIGHTLY * 6, tool_call_id=f"c{i}", id=f"t{i}")
        state["messages"] = add_messages(state["messages"], [reply, result])
    return sizes, rewrites


def test_the_persist_hook_learns_from_reported_usage_too() -> None:
    """English the estimate counts high: with usage, the rewritten history waits until the
    provider's count nears the threshold instead of the estimate's."""
    blind, blind_rewrites = persist_sizes(usage=False)
    told, told_rewrites = persist_sizes(usage=True)
    assert blind_rewrites >= 1 and told_rewrites >= 1
    assert max(told) <= 4_000
    # Without usage the estimate rewrites the history at under 85% of the threshold by
    # the provider's count; with it, the history grows past that first.
    first = next(i for i in range(1, len(blind)) if blind[i] < blind[i - 1])
    assert blind[first - 1] < 0.85 * 4_000
    assert told[first] > blind[first - 1] and max(told) > 0.9 * 4_000


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_a_request_found_by_its_content_is_found_after_add_messages_gives_it_an_id(
    mode: HookMode, caplog: pytest.LogCaptureFixture
) -> None:
    """A history without ids (a hand-built state) marks the request's last message by
    its content; ``add_messages`` then gives every message an id when the reply is
    added. The message is still the one that ended the request: its reply is read."""
    hook = create_pre_model_hook(threshold=4_000, mode=mode, agent_model="stub")
    state: dict[str, Any] = {"messages": [HumanMessage(ENGLISH_TASK[:1_500])]}
    update = hook.invoke(state)
    state["messages"] = add_messages(state["messages"], update.pop("messages", []))
    state.update(update)
    reply = AIMessage("Reading.", response_metadata={"model_name": "stub"})
    reply.usage_metadata = {"input_tokens": 300, "output_tokens": 1, "total_tokens": 301}
    state["messages"] = add_messages(state["messages"], [reply, HumanMessage("Go on.")])
    assert all(m.id for m in state["messages"])  # the task has an id now
    with caplog.at_level(logging.WARNING, logger="langchain_context_pipeline"):
        update = hook.invoke(state)
    learned = Calibration.from_state(update[CALIBRATION_STATE_KEY])
    assert learned.samples == 1 and learned.counted
    assert "no reply" not in caplog.text


def completion_service(model: str) -> Any:
    """An ``httpx`` transport in memory answering every request as a chat-completions
    service does: ``model``'s reply, 1,500 prompt tokens reported."""
    import httpx

    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1500, "completion_tokens": 1, "total_tokens": 1501},
    }
    return httpx.MockTransport(lambda request: httpx.Response(200, json=body))


def test_an_azure_deployment_and_an_alias_learn_from_their_replies() -> None:
    import httpx
    from langchain_openai import AzureChatOpenAI

    from langchain_context_pipeline.tokens.calibration import model_identity

    calibration = Calibration().sending(1000)
    # An Azure deployment named by its user, answering through langchain-openai (the
    # service's response from a transport in memory): the reply names provider
    # "openai" and the model the deployment ran.
    service = completion_service("gpt-4o-2024-08-06")
    azure = AzureChatOpenAI(
        azure_deployment="prod-chat",
        azure_endpoint="https://example.openai.azure.com",
        api_key="not-used",  # type: ignore[arg-type]
        api_version="2024-10-21",
        http_client=httpx.Client(transport=service),
        max_retries=0,
    )
    reply = azure.invoke("hi")
    assert model_identity(azure) == ("azure", "prod-chat")
    assert reply.response_metadata["model_provider"] == "openai"
    moved, reason = calibration.observe(reply, model_identity(azure))
    assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)
    assert calibration.observe(reply, ("anthropic", "claude-sonnet-4-0"))[1] is not None
    # An alias the provider resolves to a dated snapshot.
    for alias, snapshot in [
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"),
        ("claude-sonnet-4-0", "claude-sonnet-4-20250514"),
    ]:
        dated = AIMessage(
            "x", response_metadata={"model_name": snapshot, "model_provider": "anthropic"}
        )
        dated.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
        assert calibration.observe(dated, ("anthropic", alias))[1] is None
        # Another provider's reply is still not the agent's.
        assert calibration.observe(dated, ("openai", "gpt-4o"))[1] is not None
    # An alias that leaves out the version its reply names; not another model's.
    flash = AIMessage(
        "x",
        response_metadata={"model_name": "gemini-2.5-flash", "model_provider": "google_genai"},
    )
    flash.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
    assert calibration.observe(flash, ("google_genai", "gemini-flash-latest"))[1] is None
    assert calibration.observe(flash, ("google_genai", "gemini-pro-latest"))[1] is not None


def test_mistral_and_bedrock_models_learn_from_their_replies() -> None:
    """Each names its provider one way and its replies another: the families match."""
    import boto3
    import httpx
    from botocore.stub import Stubber
    from langchain_aws import ChatBedrockConverse
    from langchain_mistralai import ChatMistralAI

    from langchain_context_pipeline.tokens.calibration import model_identity

    calibration = Calibration().sending(1000)
    # ChatMistralAI over an in-memory transport: ('mistral', ...) answering as 'mistralai'.
    service = completion_service("mistral-large-2411")
    mistral = ChatMistralAI(
        model="mistral-large-latest",
        api_key="not-used",  # type: ignore[arg-type]
        client=httpx.Client(transport=service, base_url="https://api.mistral.ai/v1"),
        max_retries=0,
    )
    reply = mistral.invoke("hi")
    assert model_identity(mistral)[0] == "mistral"
    assert reply.response_metadata["model_provider"] == "mistralai"
    moved, reason = calibration.observe(reply, model_identity(mistral))
    assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)
    # ChatBedrockConverse on a stubbed client: ('amazon_bedrock', id) answering as
    # 'bedrock_converse'.
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="not-used",
        aws_secret_access_key="not-used",
    )
    stub = Stubber(client)
    stub.add_response(
        "converse",
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 1500, "outputTokens": 1, "totalTokens": 1501},
            "metrics": {"latencyMs": 1},
        },
    )
    model_id = "us.anthropic.claude-sonnet-4-20250514-v1:0"
    with stub:
        bedrock = ChatBedrockConverse(
            model=model_id,
            client=client,
            bedrock_client=client,
            region_name="us-east-1",
            aws_access_key_id="not-used",  # type: ignore[arg-type]
            aws_secret_access_key="not-used",  # type: ignore[arg-type]
        )
        reply = bedrock.invoke("hi")
    assert model_identity(bedrock) == ("amazon_bedrock", model_id)
    assert reply.response_metadata["model_provider"] == "bedrock_converse"
    moved, reason = calibration.observe(reply, model_identity(bedrock))
    assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)
    # Another Bedrock model's reply is not the agent's; the model behind an Anthropic
    # hosting's Bedrock id answers for it.
    llama = AIMessage(
        "x",
        response_metadata={
            "model_name": "meta.llama3-1-70b-instruct-v1:0",
            "model_provider": "bedrock_converse",
        },
    )
    llama.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
    assert calibration.observe(llama, model_identity(bedrock))[1] is not None
    hosted = AIMessage(
        "x",
        response_metadata={"model_name": "claude-sonnet-4-20250514", "model_provider": "anthropic"},
    )
    hosted.usage_metadata = llama.usage_metadata
    assert calibration.observe(hosted, ("anthropic-bedrock", model_id))[1] is None
    assert calibration.observe(hosted, ("anthropic-bedrock", "anthropic.claude-3-haiku"))[1]
