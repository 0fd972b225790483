"""The middleware's overflow retry against a real HTTP error: ``ChatOpenAI`` on the stub.

A ``create_agent`` agent with :class:`ContextPipelineMiddleware` talks to the
loopback OpenAI stub through a real ``ChatOpenAI``. The stub answers like OpenAI:
tool calls for a Chinese document, ``usage.prompt_tokens`` the true cl100k count of
what it was sent, and, when told to, OpenAI's own HTTP 400
``context_length_exceeded`` body. Once, the agent retries within a smaller budget and
goes on; twice, the ``openai.BadRequestError`` LangChain raised reaches the caller
as it was, and the checkpointed state (messages, carried summary, calibration) is
what it was before the failed call. Sync (``invoke``) and async (``ainvoke``) alike.
"""
# ruff: noqa: RUF001

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import quicktok
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import SecretStr

from langchain_context_pipeline import DIGEST
from langchain_context_pipeline.middleware import SUMMARY_STATE_KEY, ContextPipelineMiddleware
from langchain_context_pipeline.tokens.calibration import CALIBRATION_STATE_KEY, Calibration
from tests.integration_tests.openai_stub import (
    OpenAIStub,
    RecordedRequest,
    StubReply,
    context_length_body,
    context_length_exceeded,
)

pytestmark = pytest.mark.integration

CL100K = quicktok.get_encoding("cl100k_base")
MODEL = "gpt-4o-mini"
THRESHOLD = 8000
SYSTEM = "你是一个谨慎的编程助手，请用中文回答。" * 10
TASK = "请阅读文档的每一章并总结。"


@tool
def read_chapter(path: str) -> str:
    """读取文档的一章。"""
    return f"{path}：上下文管道在每次调用模型之前压缩对话，保留任务和最近的消息。" * 25


def request_tokens(request: RecordedRequest) -> int:
    """The true cl100k count of a chat request: every message, its tool calls, the tools."""
    payload = request.json
    total = 3
    for message in payload["messages"]:
        content = message.get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        calls = json.dumps(message.get("tool_calls") or [], ensure_ascii=False)
        total += 4 + len(CL100K.encode_ordinary(text)) + len(CL100K.encode_ordinary(calls))
    tools = json.dumps(payload.get("tools") or [], ensure_ascii=False)
    return total + len(CL100K.encode_ordinary(tools))


@dataclass
class Script:
    """What the stub does: read ``steps`` chapters a turn, then answer; fail when told.

    ``fail`` holds the numbers (counting every chat request from 0) of the requests
    answered with ``context_length_exceeded``, reporting a window of ``shrink`` of
    the request's true size.
    """

    steps: int
    fail: set[int] = field(default_factory=set)
    shrink: float = 0.7
    chapter: int = 0
    in_turn: int = 0
    sizes: list[int] = field(default_factory=list)
    windows: dict[int, int] = field(default_factory=dict)

    def __call__(self, request: RecordedRequest) -> StubReply:
        number = len(self.sizes)
        tokens = request_tokens(request)
        self.sizes.append(tokens)
        if number in self.fail:
            self.windows[number] = int(tokens * self.shrink)
            return context_length_exceeded(self.windows[number], tokens)
        usage = {"prompt_tokens": tokens, "completion_tokens": 9, "total_tokens": tokens + 9}
        if self.in_turn >= self.steps:
            self.in_turn = 0
            return StubReply(content="全部读完了：每一章都讲上下文管道。", usage=usage)
        self.in_turn += 1
        self.chapter += 1
        arguments = json.dumps({"path": f"docs/第{self.chapter}章.md"}, ensure_ascii=False)
        call = {
            "id": f"call_{self.chapter}",
            "type": "function",
            "function": {"name": "read_chapter", "arguments": arguments},
        }
        # The assistant's own notes: too short to cut, so only a summary frees their room.
        notes = f"我来读第{self.chapter}章。" + "我先看看这一章讲了什么，再决定下一步。" * 20
        return StubReply(content=notes, tool_calls=[call], usage=usage)


class Errors(BaseCallbackHandler):
    """Keeps every error a chat model run ended with, as LangChain raised it."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


def chat_model(stub: OpenAIStub, client: httpx.Client | httpx.AsyncClient) -> ChatOpenAI:
    """ChatOpenAI against the stub (no retries of its own), on a client the test closes."""
    clients: dict[str, Any] = (
        {"http_async_client": client}
        if isinstance(client, httpx.AsyncClient)
        else {"http_client": client}
    )
    return ChatOpenAI(
        model=MODEL, base_url=stub.base_url, api_key=SecretStr("test"), max_retries=0, **clients
    )


def build(model: ChatOpenAI, checkpointer: Any) -> Any:
    middleware = ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=3000, model=DIGEST)
    return create_agent(
        model,
        [read_chapter],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=checkpointer,
    )


class Runner:
    """One agent on the stub and a SQLite checkpointer, driven sync or async."""

    def __init__(self, path: str, agent: Any, errors: Errors) -> None:
        self.path = path
        self.agent = agent
        self.errors = errors
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": "overflow"},
            "recursion_limit": 200,
            "callbacks": [errors],
        }

    async def turn(self, text: str, message_id: str) -> Any:
        message = HumanMessage(text, id=message_id)
        if self.path == "sync":
            return self.agent.invoke({"messages": [message]}, self.config)
        return await self.agent.ainvoke({"messages": [message]}, self.config)

    async def state(self) -> dict[str, Any]:
        if self.path == "sync":
            return dict(self.agent.get_state(self.config).values)
        return dict((await self.agent.aget_state(self.config)).values)


@asynccontextmanager
async def runner(path: str, stub: OpenAIStub, file: Path) -> AsyncIterator[Runner]:
    errors = Errors()
    if path == "sync":
        with httpx.Client() as client, sync_saver(file) as saver:
            yield Runner(path, build(chat_model(stub, client), saver), errors)
    else:
        async with (
            httpx.AsyncClient() as client,
            AsyncSqliteSaver.from_conn_string(str(file)) as saver,
        ):
            yield Runner(path, build(chat_model(stub, client), saver), errors)


@contextmanager
def sync_saver(file: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(file, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def chapters_in(messages: list[Any]) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize(
    "number",
    [
        # The third request, far under the budget (the model's window is smaller
        # than the threshold): the retry must shrink the request, not only the budget.
        2,
        # The ninth: by then the history is compressed and calibrated.
        8,
    ],
)
async def test_one_context_length_error_is_retried_once_within_a_smaller_budget(
    number: int, path: str, tmp_path: Path
) -> None:
    script = Script(steps=14, fail={number})
    with OpenAIStub(responder=script, model=MODEL) as stub:
        async with runner(path, stub, tmp_path / "graph.sqlite") as run:
            out = await run.turn(TASK, "task")
            state = await run.state()

    # One rejection, one retry, and the run went on to its answer.
    assert len(stub.chat_requests) == 14 + 1 + 1
    rejected, retried = script.sizes[number], script.sizes[number + 1]
    assert retried < rejected
    assert retried <= script.windows[number]  # within the window the error reported
    assert len(run.errors.errors) == 1
    assert isinstance(run.errors.errors[0], openai.BadRequestError)
    assert out["messages"][-1].text == "全部读完了：每一章都讲上下文管道。"
    # Nothing lost: every chapter read is in the checkpointed history, in order.
    assert chapters_in(state["messages"]) == [f"call_{i}" for i in range(1, 15)]
    assert state[SUMMARY_STATE_KEY] is not None
    assert Calibration.from_state(state[CALIBRATION_STATE_KEY]).samples > 0


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_a_second_context_length_error_reaches_the_caller_and_loses_nothing(
    path: str, tmp_path: Path
) -> None:
    script = Script(steps=14)
    with OpenAIStub(responder=script, model=MODEL) as stub:
        async with runner(path, stub, tmp_path / "graph.sqlite") as run:
            await run.turn(TASK, "task")
            before = await run.state()
            assert before[SUMMARY_STATE_KEY] is not None  # a summary is carried
            assert Calibration.from_state(before[CALIBRATION_STATE_KEY]).samples > 0

            # The next turn's first request and its retry are both rejected.
            first = len(script.sizes)
            script.fail = {first, first + 1}
            with pytest.raises(openai.BadRequestError) as raised:
                await run.turn("请继续读下去。", "go-on")
            after = await run.state()

            # The agent still works on the same thread once the model accepts again.
            script.fail = set()
            out = await run.turn("请继续。", "again")

    # The error is the one ChatOpenAI raised on the second rejection, unchanged.
    assert len(script.sizes) >= first + 2 and script.sizes[first + 1] < script.sizes[first]
    assert raised.value is run.errors.errors[-1]
    assert len(run.errors.errors) == 2
    assert raised.value.status_code == 400
    assert raised.value.code == "context_length_exceeded"
    window = script.windows[first + 1]
    assert raised.value.body == context_length_body(window, script.sizes[first + 1])["error"]

    # Nothing lost: the history before the failed call, then the message it answered.
    kept = before["messages"]
    assert [m.id for m in after["messages"]] == [*(m.id for m in kept), "go-on"]
    assert [m.content for m in after["messages"][: len(kept)]] == [m.content for m in kept]
    # The carried summary and the calibration are as the failed call found them.
    assert after[SUMMARY_STATE_KEY] == before[SUMMARY_STATE_KEY]
    assert after[CALIBRATION_STATE_KEY] == before[CALIBRATION_STATE_KEY]
    assert out["messages"][-1].text == "全部读完了：每一章都讲上下文管道。"
    assert chapters_in(out["messages"]) == [f"call_{i}" for i in range(1, 29)]
