"""The Anthropic prompt-cache hint: the stable prefix's end is marked, nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.messages.cache_hint import (
    MAX_BREAKPOINTS,
    count_breakpoints,
    mark_stable_prefix,
)
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from tests.support import builders

THRESHOLD = 6000


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return path


def conversation(steps: int) -> list[BaseMessage]:
    return builders.conversation(
        steps,
        head=[HumanMessage("Find the bug.", id="task")],
        text=lambda i: f"step {i} " + "x" * 1900,
        output=lambda i: "y" * 3000,
    )


def request_for(messages: list[BaseMessage], model: Any = None, **extra: Any) -> ModelRequest[Any]:
    return ModelRequest(
        model=model or GenericFakeChatModel(messages=iter([])),
        messages=messages,  # type: ignore[arg-type]
        state={"messages": messages},  # type: ignore[typeddict-item]
        **extra,
    )


class Handler:
    def __init__(self) -> None:
        self.requests: list[ModelRequest[Any]] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self(request)


def sent(cache_control: bool, messages: list[BaseMessage], sync: bool = True) -> list[BaseMessage]:
    middleware = ContextPipelineMiddleware(threshold=THRESHOLD, cache_control=cache_control)
    handler = Handler()
    if sync:
        middleware.wrap_model_call(request_for(messages), handler)
    else:
        import asyncio

        asyncio.run(middleware.awrap_model_call(request_for(messages), handler.acall))
    return list(handler.requests[0].messages)


def marked_indices(messages: list[BaseMessage]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m.content, list)
        and any(isinstance(b, dict) and "cache_control" in b for b in m.content)
    ]


@pytest.mark.parametrize("sync", [True, False])
def test_the_last_message_of_the_stable_prefix_is_marked_and_nothing_else_changes(
    sync: bool,
) -> None:
    history = conversation(12)
    snapshot = [m.model_dump() for m in history]
    plain, hinted = sent(False, history, sync), sent(True, history, sync)
    report = ContextPipeline(threshold=THRESHOLD).compress(history).report
    assert "prune" in report.stages and 0 < report.stable_prefix < len(plain)
    index = report.stable_prefix - 1
    assert marked_indices(hinted) == [index]
    assert marked_indices(plain) == []
    # The protected tail follows the mark, verbatim from the history.
    tail = plain[report.stable_prefix :]
    assert [m.model_dump() for m in tail] == [m.model_dump() for m in history[-len(tail) :]]
    assert plain[index] not in history[-len(tail) :]
    # The marked message is the same message, its text now one block with the mark.
    text = plain[index].content
    assert hinted[index].content == [
        {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    ]
    assert hinted[index].model_copy(update={"content": text}).model_dump() == (
        plain[index].model_dump()
    )
    others = [m.model_dump() for i, m in enumerate(hinted) if i != index]
    assert others == [m.model_dump() for i, m in enumerate(plain) if i != index]
    assert [m.model_dump() for m in history] == snapshot  # the caller's messages


def test_under_budget_the_head_is_the_stable_prefix() -> None:
    history = conversation(2)
    hinted = sent(True, history)
    assert marked_indices(hinted) == [0]  # the task: what the next compaction keeps
    assert [m.model_dump() for m in hinted[1:]] == [m.model_dump() for m in history[1:]]


def test_a_reused_summary_ends_the_stable_prefix_under_budget() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, model=DIGEST)
    history = conversation(12)
    first = pipeline.compress(history)
    assert first.carried_summary is not None
    again = pipeline.compress(history, carried_summary=first.carried_summary, threshold=10**6)
    assert again.report.summary_reused and again.report.stages == []
    assert again.messages[again.report.stable_prefix - 1] is first.carried_summary.message


def test_nothing_is_marked_when_off() -> None:
    for steps in (2, 12):
        assert marked_indices(sent(False, conversation(steps))) == []


def anthropic_request(messages: list[BaseMessage]) -> ModelRequest[Any]:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="not-used")  # type: ignore[call-arg]
    return request_for(
        messages, model=model, system_message=SystemMessage("You fix bugs."), tools=[read_file]
    )


def breakpoints(request: ModelRequest[Any]) -> int:
    return count_breakpoints(
        request.messages, request.system_message, request.tools, request.model_settings
    )


@pytest.mark.parametrize("ours_inner", [True, False])
def test_with_anthropics_middleware_at_most_four_breakpoints(ours_inner: bool) -> None:
    ours = ContextPipelineMiddleware(threshold=THRESHOLD, cache_control=True)
    theirs = AnthropicPromptCachingMiddleware()
    handler = Handler()
    outer, inner = (theirs, ours) if ours_inner else (ours, theirs)
    outer.wrap_model_call(
        anthropic_request(conversation(12)), lambda r: inner.wrap_model_call(r, handler)
    )
    request = handler.requests[0]
    assert len(marked_indices(list(request.messages))) == 1
    assert breakpoints(request) == MAX_BREAKPOINTS  # system, tools, last message, ours


async def test_a_request_already_at_the_limit_gets_no_more_async() -> None:
    ours = ContextPipelineMiddleware(threshold=THRESHOLD, cache_control=True)
    theirs = AnthropicPromptCachingMiddleware()
    history = conversation(12)
    # The caller marked an early message itself: with Anthropic's three, four in all.
    history[1] = history[1].model_copy(
        update={"content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}
    )
    handler = Handler()

    async def inner(request: ModelRequest[Any]) -> Any:
        return await ours.awrap_model_call(request, handler.acall)

    await theirs.awrap_model_call(anthropic_request(history), inner)
    request = handler.requests[0]
    assert breakpoints(request) <= MAX_BREAKPOINTS


def test_a_message_with_nothing_to_mark_passes_the_mark_back() -> None:
    call = {"name": "read_file", "args": {"path": "a"}, "id": "c"}
    messages: list[BaseMessage] = [
        HumanMessage("task"),
        AIMessage([{"type": "text", "text": "plan"}, {"type": "thinking", "thinking": "t"}]),
        AIMessage("", tool_calls=[call]),
    ]
    out = mark_stable_prefix(messages, 3)
    assert out is not None and marked_indices(out) == [0]
    assert messages[0].content == "task"  # not mutated
    assert mark_stable_prefix(messages, 0) is None
    assert mark_stable_prefix(out, 3) is None  # the prefix already ends at a breakpoint
    assert mark_stable_prefix(messages, 1, breakpoints=MAX_BREAKPOINTS) is None
    assert mark_stable_prefix(messages[:1], 1, tail_marked=True) is None
