"""The turn shared by the pre-model hook and the middleware: warn once, read once, one budget."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.integrations import turn
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.middleware import SUMMARY_STATE_KEY, ContextPipelineMiddleware
from langchain_context_pipeline.tokens.calibration import CALIBRATION_STATE_KEY

THRESHOLD = 6000
TAIL = 2000
SYSTEM = "You are a careful engineer. Read the files before you answer."
_TOOL_TEXT = "lorem ipsum dolor sit amet " * 150


@tool
def read_file(path: str) -> str:
    """Read a file of the repository and return its whole content, line by line."""
    return path


def conversation(steps: int) -> list[BaseMessage]:
    """A task, then ``steps`` tool steps: over ``THRESHOLD`` from about 4 steps on."""
    messages: list[BaseMessage] = [HumanMessage("Find the bug.", id="task")]
    for i in range(steps):
        call = {"name": "read_file", "args": {"path": f"src/m{i}.py"}, "id": f"c{i}"}
        messages.append(AIMessage(f"step {i}", tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(_TOOL_TEXT, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


class CountingState(dict[str, Any]):
    """A state that counts the reads of the summary key."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        if key == SUMMARY_STATE_KEY:
            self.reads += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        if key == SUMMARY_STATE_KEY:
            self.reads += 1
        return super().__getitem__(key)


def request_for(
    messages: list[BaseMessage], state: dict[str, Any] | None = None, **profile: Any
) -> ModelRequest[Any]:
    return ModelRequest(
        model=GenericFakeChatModel(messages=iter([]), profile=profile or None),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(SYSTEM),
        tools=[read_file],
        state=state if state is not None else {"messages": messages},  # type: ignore[arg-type]
    )


def middleware() -> ContextPipelineMiddleware:
    return ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL, model=DIGEST)


def ok(request: ModelRequest[Any]) -> ModelResponse[Any]:
    """The model: answers ``ok``, without usage metadata."""
    return ModelResponse(result=[AIMessage("ok")])


def records(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


# -- WarnOnce -------------------------------------------------------------------------------

_KINDS = ["no usage: x", "other model: y", "bad count: z", "threshold 9 is above"]


@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 10**6)), max_size=30))
def test_warn_once_admits_each_kind_of_reason_once(reasons: list[tuple[str, int]]) -> None:
    warn = turn.WarnOnce()
    admitted = [kind for kind, n in reasons if warn.first(f"{kind} {n}")]
    kinds = {" ".join(kind.split(" ", 2)[:2]) for kind, _ in reasons}
    assert len(admitted) == len(kinds) == len(set(admitted))
    fresh = turn.WarnOnce()  # per instance: another owner warns again
    assert all(fresh.first(reason) for reason in admitted)


def test_the_middleware_warns_about_the_window_once_per_instance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = middleware(), middleware()
    with caplog.at_level(logging.WARNING, logger="langchain_context_pipeline"):
        for entry in (first, first, first, second):
            entry.wrap_model_call(request_for(conversation(2), max_input_tokens=4000), ok)
    assert records(caplog, "is above the agent model's window") == 2


@pytest.mark.parametrize("path", ["sync", "async"])
def test_the_middleware_warns_about_an_unusable_reply_once_per_instance(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = middleware(), middleware()

    async def aok(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return ok(request)

    with caplog.at_level(logging.WARNING, logger="langchain_context_pipeline"):
        for entry in (first, first, second):
            if path == "sync":
                entry.wrap_model_call(request_for(conversation(6)), ok)
            else:
                asyncio.run(entry.awrap_model_call(request_for(conversation(6)), aok))
    assert records(caplog, "token calibration: no usage") == 2


def test_the_hook_warns_about_an_unusable_reply_once_per_instance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def hook() -> Any:
        return create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=DIGEST)

    first, second = hook(), hook()
    messages = conversation(6)
    sent = first({"messages": messages})[CALIBRATION_STATE_KEY]
    state = {"messages": [*messages, AIMessage("ok", id="reply")], CALIBRATION_STATE_KEY: sent}
    with caplog.at_level(logging.WARNING, logger="langchain_context_pipeline"):
        for entry in (first, first, second):
            entry(state)
    assert records(caplog, "token calibration: no usage") == 2


# -- one read of state per call ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
def test_the_middleware_reads_the_carried_summary_once_per_call(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers: list[str] = []
    original = turn.read_summary

    def counted(state: Any, key: str) -> Any:
        readers.append(key)
        return original(state, key)

    monkeypatch.setattr(turn, "read_summary", counted)
    entry = middleware()
    messages = conversation(6)
    calls: list[int] = []

    def overflow_once(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(1)
        if len(calls) == 1:  # the retry path is a single read too
            raise ValueError("prompt is too long: 9000 tokens > 6000 maximum")
        return ok(request)

    async def aoverflow_once(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return overflow_once(request)

    for handler in (ok, overflow_once):
        state = CountingState(messages=messages)
        readers.clear()
        request = request_for(messages, state)
        if path == "sync":
            entry.wrap_model_call(request, handler)
        else:
            ahandler = aoverflow_once if handler is overflow_once else None
            asyncio.run(entry.awrap_model_call(request, ahandler or _async(ok)))
        assert readers == [SUMMARY_STATE_KEY]
        assert state.reads == 1
    assert len(calls) == 2


def _async(handler: Any) -> Any:
    async def call(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return handler(request)  # type: ignore[no-any-return]

    return call


# -- one budget -------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [1, 6])
def test_hook_and_middleware_compress_within_the_same_budget(
    steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    original = ContextPipeline.compress

    def compress(self: ContextPipeline, messages: Any, **keywords: Any) -> Any:
        seen.append({**keywords, "threshold": keywords["threshold"] or self.threshold})
        return original(self, messages, **keywords)

    monkeypatch.setattr(ContextPipeline, "compress", compress)
    hook = create_pre_model_hook(
        threshold=THRESHOLD, tail_budget=TAIL, model=DIGEST, system_prompt=SYSTEM, tools=[read_file]
    )
    entry = middleware()
    messages = conversation(steps)
    request = request_for(messages)
    assert hook.budget == entry._budget(request)
    assert hook.budget.reserved > 0
    hook({"messages": messages})
    passes = len(seen)
    entry.wrap_model_call(request, ok)
    first_hook, first_middleware = seen[0], seen[passes]
    for key in ("threshold", "reserved_tokens", "carried_summary", "over_budget"):
        assert first_hook[key] == first_middleware[key]


def _replied(text: str, tokens: int, id: str | None = None) -> AIMessage:
    reply = AIMessage(text, id=id)
    reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens}
    return reply


def test_the_reply_is_found_where_the_request_ended_without_ids_or_with_repeated_ones() -> None:
    old = _replied("first answer", 2_000)
    sent = [HumanMessage("task"), old, HumanMessage("go on")]
    mark, at = turn.message_mark(sent[-1]), len(sent)
    new = _replied("second answer", 7_000)
    later = [*sent, new, HumanMessage("more")]
    # Without ids, the message the request ended with is found where it stood (the
    # first id-less message is the task: its reply is the old answer, not this one).
    assert turn.reply_after(later, mark, at) is new
    # The same id twice: where it stood, or no reply at all.
    twice = [HumanMessage("a", id="x"), old, HumanMessage("b", id="x"), new]
    assert turn.reply_after(twice, "x", 3) is new
    assert turn.reply_after(twice, "x") is None
    # A history rewritten before it (a message removed): found by its id, when unique.
    moved = [HumanMessage("b", id="y"), new]
    assert turn.reply_after(moved, "y", 3) is new
    # Neither where it stood nor by a unique id: no reply, rather than another's.
    assert turn.reply_after([HumanMessage("other"), new], mark, at) is None
    # A model node that keeps the merged stream leaves an AIMessageChunk: the reply too.
    streamed = AIMessageChunk("streamed answer", usage_metadata=new.usage_metadata)
    assert turn.reply_after([*sent, streamed, new], mark, at) is streamed
