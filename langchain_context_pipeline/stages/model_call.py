"""Calling the summarizer: the only place where sync and async differ.

The planners are generators: they ``yield`` a :class:`SummaryRequest` and receive
the model's reply (or the exception it raised). :func:`drive` and :func:`adrive`
run a planner to completion, answering each request with a sync or an async call;
the entry points' turns (``integrations.turn``) are run by the same two.

A summarizer that can only run async (a coroutine function or an object with an
async ``__call__``, a ``BaseChatModel`` whose ``_generate`` raises
``NotImplementedError``, a callable that returns an awaitable) is still called
under the sync path: its coroutine runs on this module's private event loop, one
loop on one daemon thread for the whole process, so the caller's thread (and any
loop running there) is never re-entered and the model's async clients keep the one
loop their connections belong to. The timeout cancels the coroutine there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from contextvars import Context, copy_context
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableLambda,
    ensure_config,
    patch_config,
)

from langchain_context_pipeline.errors import SummaryTimeoutError
from langchain_context_pipeline.messages.snapshot import Transient

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


def is_async_only(model: Runnable[Any, Any]) -> bool:
    """Whether ``model`` has no sync implementation that can be known in advance.

    A ``RunnableLambda`` built from a coroutine function (or an object with an async
    ``__call__``) has only ``afunc``. A chat model whose ``_generate`` raises
    ``NotImplementedError`` is found out at its first call (see :func:`call_model`).
    """
    return isinstance(model, RunnableLambda) and not hasattr(model, "func")


def _has_async(model: Runnable[Any, Any]) -> bool:
    """Whether ``model`` implements its own async call (not the sync one in an executor)."""
    if isinstance(model, BaseChatModel):
        kind = type(model)
        return (
            kind._agenerate is not BaseChatModel._agenerate
            or kind._astream is not BaseChatModel._astream
        )
    return type(model).ainvoke is not Runnable.ainvoke


class _PrivateLoop(Transient):
    """One event loop on one daemon thread, for coroutines the sync path must run.

    Started at first use (and again in a forked child, which has no such thread,
    or in a copy, which starts its own).
    """

    transient = ("_lock", "_loop", "_thread", "_pid")

    def __init__(self) -> None:
        self._fresh()

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        """Return the running loop and its thread, starting them if needed."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or self._thread is None or not alive or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"{RUN_NAME}-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop, self._thread


_PRIVATE_LOOP = _PrivateLoop()


async def _in_context(awaitable: Awaitable[Any], context: Context) -> Any:
    """Await ``awaitable`` with the caller's context variables set (tracing, config)."""
    for var, value in context.items():
        var.set(value)
    return await awaitable


def run_on_private_loop(
    factory: Callable[[], Awaitable[Any]],
    context: Context,
    timeout: float | None,
    deadline: float | None,
) -> Any:
    """Run the awaitable ``factory()`` makes on the private loop; wait until ``deadline``.

    ``timeout`` is the summary timeout the ``deadline`` (or None) came from.

    Returns its result or raises what it raised (a ``CancelledError`` it raised
    comes back as ``concurrent.futures.CancelledError``). At ``deadline``
    (``time.monotonic()``) the coroutine is cancelled and
    :class:`SummaryTimeoutError` is raised.

    Raises:
        RuntimeError: when called on the private loop's own thread (an async
            summarizer that calls the sync pipeline), which would wait for itself.
    """
    loop, thread = _PRIVATE_LOOP.get()
    if threading.current_thread() is thread:
        raise RuntimeError(
            "an async-only summarizer cannot be run from the summarizer loop's own thread"
        )

    async def main() -> Any:
        return await _in_context(factory(), context)

    coroutine: Coroutine[Any, Any, Any] = main()
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    try:
        return future.result(wait)
    except concurrent.futures.TimeoutError:
        if future.done():  # the model's own TimeoutError, raised just in time
            raise
        future.cancel()  # cancels the task on the private loop
        raise SummaryTimeoutError(f"summarizer gave no answer within {timeout} s") from None
    except BaseException:
        future.cancel()  # the caller gave up (KeyboardInterrupt...): so does the coroutine
        raise


def call_model(model: Runnable[Any, Any], request: SummaryRequest, timeout: float | None) -> Reply:
    """Call the summarizer synchronously; return its reply or the exception it raised.

    An async-only summarizer (see :func:`is_async_only`; a sync call that raises
    ``NotImplementedError`` while the model has an async implementation; a sync
    call whose reply is awaitable) is awaited on the private loop (see the module
    docstring), under the same timeout.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    context = copy_context()

    def call() -> Any:
        bound = _hinted(model, request)
        config = _child_config()

        def acall() -> Awaitable[Any]:
            return bound.ainvoke(request.prompt, config=config)

        if is_async_only(model):
            return run_on_private_loop(acall, context, timeout, deadline)
        try:
            reply = bound.invoke(request.prompt, config=config)
        except NotImplementedError:
            if not _has_async(model):
                raise
            return run_on_private_loop(acall, context, timeout, deadline)
        if inspect.isawaitable(reply):
            return run_on_private_loop(lambda: reply, context, timeout, deadline)
        return reply

    try:
        if timeout is None or is_async_only(model):
            # The private loop is the worker: the timeout cancels the coroutine there.
            return context.run(call)
        # A hung client must not hang the agent: the call runs in a worker thread
        # that is abandoned (not joined) after the timeout.
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=RUN_NAME)
        future = pool.submit(context.run, call)
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


class _Steps(Generic[R, T]):
    """A sans-IO generator's requests, one at a time, for :func:`drive` / :func:`adrive`.

    Iterating gives each request; the driver answers it inside :meth:`answering`.
    The reply set there is sent in; what answering raised is thrown in, so the
    generator's own cleanup (a ``try``/``finally``, an ``except`` that re-raises)
    runs, and it propagates from the generator unless the generator handles it.
    """

    def __init__(self, plan: Generator[R, Any, T]) -> None:
        self._plan = plan
        self._error: BaseException | None = None
        self.reply: Any = None
        """The answer to the current request, set by the driver."""

    def __iter__(self) -> Iterator[R]:
        try:
            request = next(self._plan)
            while True:
                self.reply, self._error = None, None
                yield request
                error, self._error = self._error, None
                request = self._plan.send(self.reply) if error is None else self._plan.throw(error)
        except StopIteration as done:
            self.result: T = done.value

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Answer the current request inside this block; what it raises is thrown in."""
        try:
            yield
        except BaseException as error:  # every failure goes to the generator
            self._error = error


def drive(plan: Generator[R, Any, T], answer: Callable[[R], Any]) -> T:
    """Run ``plan``, answering each request with ``answer``; what it raises is thrown in.

    Entered by the planners (inside one pass, see
    :func:`~langchain_context_pipeline.messages.anatomy.one_pass`) and by the
    entry points' turns (whose steps include the agent's own model call: no pass).
    """
    steps = _Steps(plan)
    for request in steps:
        with steps.answering():
            steps.reply = answer(request)
    return steps.result


async def adrive(plan: Generator[R, Any, T], answer: Callable[[R], Awaitable[Any]]) -> T:
    """Async :func:`drive`: each answer is awaited."""
    steps = _Steps(plan)
    for request in steps:
        with steps.answering():
            steps.reply = await answer(request)
    return steps.result
