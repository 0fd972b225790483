"""Calling the summarizer: the only place where sync and async differ.

The planners are generators: they ``yield`` a :class:`SummaryRequest` and receive
the model's reply (or the exception it raised). :func:`drive` and :func:`adrive`
run a planner to completion, answering each request with a sync or an async call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable, Generator
from contextvars import copy_context
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config, patch_config

TAG_NOSTREAM = "nostream"
"""langgraph's ``TAG_NOSTREAM``: runs tagged so stay out of the user's token stream.

It is spelt here so that the core does not import langgraph; a test pins it to
``langgraph.constants.TAG_NOSTREAM``.
"""

RUN_NAME = "context_condenser"
"""The name of the summarizer's run in traces."""

T = TypeVar("T")
R = TypeVar("R")

Reply = Any
"""What the summarizer answered: a message, text, None, or the exception it raised."""


@dataclass(frozen=True)
class SummaryRequest:
    """One call the planner needs the summarizer to make."""

    prompt: list[BaseMessage]
    """The messages sent to the summarizer."""
    max_tokens: int
    """The summary's token budget, passed as a max-tokens hint where the model takes one."""


SummaryModel = BaseChatModel | Runnable[Any, Any] | Callable[..., Any]
"""A summarizer: a chat model, a Runnable or a callable taking the prompt messages."""

_HINT_FIELDS = ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens")


class SummaryTimeoutError(TimeoutError):
    """The summarizer did not answer within ``summary_timeout`` seconds."""


def max_tokens_hint(model: Any, budget: int) -> dict[str, Any]:
    """Return the keyword a chat model takes for its output cap, set to ``budget``."""
    if not isinstance(model, BaseChatModel):
        return {}
    fields = type(model).model_fields
    for name in _HINT_FIELDS:
        if name in fields:
            return {name: budget}
    return {}


def _child_config() -> RunnableConfig:
    parent = ensure_config()
    config = patch_config(parent, run_name=RUN_NAME)
    config["tags"] = [*parent.get("tags", []), TAG_NOSTREAM]
    return config


def _hinted(model: Runnable[Any, Any], request: SummaryRequest) -> Runnable[Any, Any]:
    hint = max_tokens_hint(model, request.max_tokens)
    return model.bind(**hint) if hint else model


def call_model(model: Runnable[Any, Any], request: SummaryRequest, timeout: float | None) -> Reply:
    """Call the summarizer synchronously; return its reply or the exception it raised."""

    def call() -> Any:
        return _hinted(model, request).invoke(request.prompt, config=_child_config())

    try:
        if timeout is None:
            return call()
        # A hung client must not hang the agent: the call runs in a worker thread
        # that is abandoned (not joined) after the timeout.
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=RUN_NAME)
        future = pool.submit(copy_context().run, call)
        pool.shutdown(wait=False)
        done, _ = concurrent.futures.wait([future], timeout=timeout)
        if not done:
            future.cancel()
            return SummaryTimeoutError(f"summarizer gave no answer within {timeout} s")
        return future.result()  # the model's own exceptions (TimeoutError too) go below
    except (Exception, asyncio.CancelledError) as exc:  # every failure is a reply
        return exc


def _caller_cancelled() -> bool:
    """Whether the task running now is being cancelled by its caller (Python 3.11+)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


async def acall_model(
    model: Runnable[Any, Any], request: SummaryRequest, timeout: float | None
) -> Reply:
    """Call the summarizer asynchronously; return its reply or the exception it raised.

    A plain function is run in a worker thread (``RunnableLambda``'s ``ainvoke``),
    so a slow synchronous summarizer never blocks the event loop and the timeout
    holds for it too. A ``CancelledError`` raised by the summarizer is a failure
    like any other; cancelling the caller's own task still cancels.
    """

    async def call() -> Any:
        reply = await _hinted(model, request).ainvoke(request.prompt, config=_child_config())
        # A callable object whose __call__ returns a coroutine is not seen as async
        # by RunnableLambda: its reply is the coroutine itself.
        return await reply if inspect.isawaitable(reply) else reply

    try:
        if timeout is None:
            return await call()
        task = asyncio.ensure_future(call())
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            # Collect the cancelled task's outcome so nothing is logged as unretrieved.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            return SummaryTimeoutError(f"summarizer gave no answer within {timeout} s")
        return task.result()  # the model's own exceptions (TimeoutError too) go below
    except asyncio.CancelledError as exc:
        if _caller_cancelled():
            raise
        return exc
    except Exception as exc:
        return exc


Plan = Generator[SummaryRequest, Reply, T]


def drive(plan: Generator[R, Reply, T], answer: Callable[[R], Reply]) -> T:
    """Run a planner, answering each request with ``answer``."""
    try:
        request = next(plan)
        while True:
            request = plan.send(answer(request))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(plan: Generator[R, Reply, T], answer: Callable[[R], Any]) -> T:
    """Run a planner, answering each request with the awaitable ``answer``."""
    try:
        request = next(plan)
        while True:
            request = plan.send(await answer(request))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
