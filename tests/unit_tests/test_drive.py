"""One driver for every sans-IO generator: the planners' passes and the entry points' turns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.integrations import turn
from langchain_context_pipeline.messages import anatomy
from langchain_context_pipeline.stages import model_call
from langchain_context_pipeline.stages.model_call import adrive, drive
from tests.unit_tests.test_turn import conversation, middleware, ok, request_for

PATHS = ["sync", "async"]


def on(
    path: str, sync: Callable[[], Any], asynchronous: Callable[[], Coroutine[Any, Any, Any]]
) -> Any:
    """Call ``sync()`` on the sync path, else run ``asynchronous()`` to completion."""
    return sync() if path == "sync" else asyncio.run(asynchronous())


def run(path: str, plan: Generator[Any, Any, Any], answer: Callable[[Any], Any]) -> Any:
    """Drive ``plan`` on ``path``, ``answer`` made awaitable for the async driver."""

    async def aanswer(request: Any) -> Any:
        return answer(request)

    return on(path, lambda: drive(plan, answer), lambda: adrive(plan, aanswer))


class Interrupted(BaseException):
    """Not an ``Exception``: nothing on the way may take it for a summarizer's failure."""


def test_the_turns_are_run_by_the_planners_driver() -> None:
    assert turn.drive is model_call.drive
    assert turn.adrive is model_call.adrive


@pytest.mark.parametrize("path", PATHS)
def test_each_answer_is_sent_in_and_the_return_value_comes_back(path: str) -> None:
    def plan() -> Generator[int, int, list[int]]:
        return [(yield 1), (yield 2)]

    assert run(path, plan(), lambda n: n * 10) == [10, 20]


@pytest.mark.parametrize("path", PATHS)
def test_what_answering_raises_is_thrown_in_so_the_cleanup_runs_first(path: str) -> None:
    events: list[str] = []
    error = ValueError("the model is down")

    def plan() -> Generator[str, Any, None]:
        try:
            yield "call"
        finally:
            events.append("cleanup")

    def answer(request: str) -> Any:
        raise error

    with pytest.raises(ValueError) as raised:
        run(path, plan(), answer)
    assert raised.value is error  # the original exception, unchanged
    assert events == ["cleanup"]


@pytest.mark.parametrize("path", PATHS)
def test_a_generator_that_handles_what_was_thrown_in_goes_on(path: str) -> None:
    # The middleware's turn retries once after a context-length error at the model call.
    def plan() -> Generator[str, str, str]:
        try:
            yield "first"
        except LookupError:
            return (yield "retry")
        return "no retry"

    def answer(request: str) -> Any:
        if request == "first":
            raise KeyError("too long")
        return "answered"

    assert run(path, plan(), answer) == "answered"


def history() -> list[BaseMessage]:
    """Plain turns that pruning cannot shrink: only a summary brings them under 3000."""
    messages: list[BaseMessage] = [HumanMessage("the task", id="task")]
    for i in range(12):
        messages.append(HumanMessage(f"question {i}: " + "why is it so " * 60, id=f"q{i}"))
        messages.append(AIMessage(f"answer {i}: " + "because it is " * 60, id=f"a{i}"))
    return messages


@pytest.mark.parametrize("path", PATHS)
def test_the_planner_lets_what_the_summarizer_raises_beyond_exception_through_unchanged(
    path: str,
) -> None:
    # The planner is thrown what answering its request raised: it handles none of
    # it (a summarizer's Exception is a failure reply, never raised), so the
    # original exception leaves compress as it did, and the pass is left.
    error = Interrupted()
    in_pass: list[bool] = []

    def summarize(messages: list[BaseMessage]) -> str:
        in_pass.append(anatomy._pass.get() is not None)
        raise error

    pipeline = ContextPipeline(
        threshold=3000, tail_budget=800, model=RunnableLambda(summarize), summary_memory=False
    )
    with pytest.raises(Interrupted) as raised:
        on(path, lambda: pipeline.compress(history()), lambda: pipeline.acompress(history()))
    assert raised.value is error
    assert in_pass == [True]  # the summarizer is called within the planner's pass
    assert anatomy._pass.get() is None


@pytest.mark.parametrize("path", PATHS)
def test_the_planner_still_reads_a_summarizers_exception_as_a_failure(path: str) -> None:
    def summarize(messages: list[BaseMessage]) -> str:
        raise RuntimeError("the summarizer is down")

    pipeline = ContextPipeline(
        threshold=3000, tail_budget=800, model=RunnableLambda(summarize), summary_memory=False
    )
    messages = history()
    result = on(path, lambda: pipeline.compress(messages), lambda: pipeline.acompress(messages))
    assert result.report.condense is not None
    assert result.report.condense.summarizer_failures == 1
    assert result.report.condense.source == "digest"


@pytest.mark.parametrize("path", PATHS)
def test_the_agents_own_model_call_is_not_in_the_planners_pass(path: str) -> None:
    # The turn's steps include the agent's model call: only the compression, not the
    # whole turn, is one pass.
    in_pass: list[bool] = []

    def handler(request: Any) -> Any:
        in_pass.append(anatomy._pass.get() is not None)
        return ok(request)

    async def ahandler(request: Any) -> Any:
        return handler(request)

    entry = middleware()
    request = request_for(conversation(6))
    on(
        path,
        lambda: entry.wrap_model_call(request, handler),
        lambda: entry.awrap_model_call(request, ahandler),
    )
    assert in_pass == [False]
