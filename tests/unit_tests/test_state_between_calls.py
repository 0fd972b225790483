"""What a pipeline keeps between calls never changes what it returns.

- a system message inside the span a carried summary replaces stays (DESIGN
  invariant 3), for ``SystemMessage`` and ``ChatMessage`` with role system or
  developer, with the digest and with a model, sync and async;
- the pruning memo never returns what a fresh pipeline would not, whatever was
  edited in place between calls (DESIGN invariant 4);
- a slow synchronous summarizer under ``acompress`` neither blocks the event loop
  nor outlives ``summary_timeout``; a summarizer raising ``CancelledError`` is a
  failure like any other, while cancelling the caller's own task still cancels;
- an async-only summarizer under sync ``compress`` writes the summary (on the
  pipeline's private loop), within ``summary_timeout``, also when a loop runs in
  the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda

from langchain_context_pipeline import DIGEST, ContextPipeline, estimate_tokens
from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.tokens.counters import message_text
from tests.support.fakes import Call, ReplyingChatModel
from tests.support.invariants import snapshot

LONG = "The agent read the module and compared the results. " * 45
POLICY = "POLICY: never push to main."


def summarize(prompt: Sequence[BaseMessage]) -> str:
    return "The user sent three long notes about the module."


def run(pipeline: ContextPipeline, path: str, messages: list[BaseMessage], **kw: Any) -> Any:
    if path == "sync":
        return pipeline.compress(messages, **kw)
    return asyncio.run(pipeline.acompress(messages, **kw))


# -- a system message inside a reused summary's span ---------------------------------------


def policy_messages() -> list[BaseMessage]:
    return [
        SystemMessage(POLICY, id="policy"),
        ChatMessage("Always run the linter first.", role="system", id="chat-system"),
        ChatMessage("Answer in English.", role="developer", id="chat-developer"),
    ]


def minimal_case(policy: BaseMessage) -> list[BaseMessage]:
    """The issue's minimal case: system, task, three long, the policy, three long."""
    messages: list[BaseMessage] = [SystemMessage("You are terse.", id="sys")]
    messages.append(HumanMessage("Tidy the repository.", id="task"))
    messages += [HumanMessage(LONG, id=f"before{i}") for i in range(3)]
    messages.append(policy)
    messages += [HumanMessage(LONG, id=f"after{i}") for i in range(3)]
    return messages


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("model", [DIGEST, summarize], ids=["digest", "model"])
@pytest.mark.parametrize("policy", policy_messages(), ids=lambda m: m.id)
def test_a_reused_summary_keeps_the_system_messages_of_its_span(
    policy: BaseMessage, model: Any, path: str
) -> None:
    pipeline = ContextPipeline(threshold=2000, tail_budget=600, model=model)
    messages = minimal_case(policy)
    first = run(pipeline, path, messages)
    assert first.carried_summary is not None
    assert policy in first.messages
    grown = [*messages, HumanMessage("One more thing.", id="new")]
    carried = first.carried_summary
    for turn in range(4):
        result = run(pipeline, path, grown, carried_summary=carried)
        if turn == 0:
            assert result.report.summary_reused
        assert [m for m in result.messages if m.id == policy.id] == [policy], f"turn {turn}"
        assert estimate_tokens(result.messages) <= 2000
        carried = result.carried_summary
        grown = [*grown, HumanMessage(LONG, id=f"more{turn}")]


# -- the pruning memo and edits in place -----------------------------------------------------


def bulky_history() -> list[BaseMessage]:
    call = {
        "name": "bash",
        "args": {"command": "env | grep KEY", "note": "check every service. " * 20},
        "id": "c1",
    }
    return [
        SystemMessage("You are a coding agent.", id="sys"),
        HumanMessage("Check the deployment keys.", id="task"),
        AIMessage(
            "Let me look. " + "I will check the environment for keys. " * 77,
            tool_calls=[call],
            id="a1",
        ),
        ToolMessage(
            [{"type": "text", "text": "API_KEY=hunter2\n" * 200}], tool_call_id="c1", id="t1"
        ),
        HumanMessage("Now summarise what the logs say. " * 130, id="later"),
    ]


def redact_block(m: list[BaseMessage]) -> None:
    m[3].content[0]["text"] = "API_KEY=[REDACTED]\n" * 200  # type: ignore[index]


def redact_content(m: list[BaseMessage]) -> None:
    m[3].content = "API_KEY=[REDACTED]\n" * 200


def edit_args(m: list[BaseMessage]) -> None:
    m[2].tool_calls[0]["args"]["command"] = "env | grep TOKEN"  # type: ignore[attr-defined]


def edit_text(m: list[BaseMessage]) -> None:
    m[2].content = "Let me look again. " + "Reading the environment once more. " * 85


def rename(m: list[BaseMessage]) -> None:
    m[3].name = "shell"
    m[3].response_metadata["edited"] = True


EDITS: list[Callable[[list[BaseMessage]], None]] = [
    redact_block,
    redact_content,
    edit_args,
    edit_text,
    rename,
]


@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__)
def test_the_memo_never_returns_what_a_fresh_pipeline_would_not(
    edit: Callable[[list[BaseMessage]], None],
) -> None:
    # low_water=1: pruning brings this history under the threshold, and the edited
    # messages stay in the output (pruned) instead of being truncated away.
    settings: dict[str, Any] = {"threshold": 2000, "tail_budget": 700, "low_water": 1.0}
    pipeline = ContextPipeline(**settings)
    messages = bulky_history()
    before = pipeline.compress(messages)
    edit(messages)
    after = pipeline.compress(messages)
    fresh = ContextPipeline(**settings).compress(messages)
    assert snapshot(after.messages) == snapshot(fresh.messages)
    assert after.report.prune == fresh.report.prune
    assert snapshot(after.messages) != snapshot(before.messages)
    if edit in (redact_block, redact_content):
        assert "hunter2" not in "".join(message_text(m) for m in after.messages)


def test_an_output_edited_by_its_receiver_is_not_handed_out_again() -> None:
    pipeline = ContextPipeline(threshold=2000, tail_budget=700)
    messages = bulky_history()
    first = pipeline.compress(messages)
    brief = first.messages[3]
    assert brief is not messages[3]
    brief.content = "tampered"
    again = pipeline.compress(messages)
    assert again.messages[3].content != "tampered"
    assert snapshot(again.messages) == snapshot(
        ContextPipeline(threshold=2000, tail_budget=700).compress(messages).messages
    )


# -- summarizer timeouts and cancellation ----------------------------------------------------


def condensable() -> list[BaseMessage]:
    return minimal_case(HumanMessage(LONG, id="middle"))


def test_a_slow_sync_summarizer_under_acompress_neither_blocks_the_loop_nor_is_waited_for() -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(prompt: Sequence[BaseMessage]) -> str:
        started.set()
        release.wait(3)  # a 3-second summarizer, released early at the end of the test
        return "late summary that must not be used"

    pipeline = ContextPipeline(threshold=2000, tail_budget=600, model=slow, summary_timeout=0.5)

    async def main() -> tuple[CompressionResult, int, bool]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        result = await pipeline.acompress(condensable())
        still_running = not release.is_set() and started.is_set()
        done.set()
        await task
        return result, ticks, still_running

    try:
        result, ticks, still_running = asyncio.run(main())
    finally:
        release.set()
    # The loop kept turning while the summarizer ran in its worker thread...
    assert ticks >= 5
    # ...and acompress returned while the summarizer was still running.
    assert still_running
    assert result.report.summary_source == "digest"
    assert "SummaryTimeoutError" in (result.report.condense.failure or "")
    assert "late summary" not in "".join(message_text(m) for m in result.messages)


def cancelling(prompt: Sequence[BaseMessage]) -> str:
    raise asyncio.CancelledError


async def acancelling(prompt: Sequence[BaseMessage]) -> str:
    raise asyncio.CancelledError


@pytest.mark.parametrize("timeout", [None, 5.0])
@pytest.mark.parametrize(
    ("model", "path"),
    [(cancelling, "sync"), (cancelling, "async"), (acancelling, "async"), (acancelling, "sync")],
    ids=["sync_fn-compress", "sync_fn-acompress", "async_fn-acompress", "async_fn-compress"],
)
def test_a_summarizer_raising_cancelled_error_is_a_failure(
    model: Any, timeout: float | None, path: str
) -> None:
    pipeline = ContextPipeline(
        threshold=2000, tail_budget=600, model=model, summary_timeout=timeout
    )
    result = run(pipeline, path, condensable())
    assert result.report.summary_source == "digest"
    assert result.report.condense.summarizer_failures == 1
    assert "CancelledError" in (result.report.condense.failure or "")
    assert estimate_tokens(result.messages) <= 2000


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_cancelling_the_callers_task_still_cancels(timeout: float | None) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def hangs(prompt: Sequence[BaseMessage]) -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        pipeline = ContextPipeline(
            threshold=2000, tail_budget=600, model=hangs, summary_timeout=timeout
        )
        task = asyncio.create_task(pipeline.acompress(condensable()))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())


# -- an async-only summarizer under sync compress ---------------------------------------------

ASYNC_SUMMARY = "The user sent three long notes (written asynchronously)."


async def async_summarize(prompt: Sequence[BaseMessage]) -> str:
    return ASYNC_SUMMARY


class AsyncCallable:
    """An object whose ``__call__`` is a coroutine function."""

    async def __call__(self, prompt: Sequence[BaseMessage]) -> str:
        return ASYNC_SUMMARY


class ReturnsAwaitable:
    """A plain ``__call__`` that returns a coroutine (not seen as async up front)."""

    def __call__(self, prompt: Sequence[BaseMessage]) -> Awaitable[str]:
        return async_summarize(prompt)


class AsyncOnlyChatModel(ReplyingChatModel):
    """A chat model with only an async implementation (its sync ``_reply`` is not implemented)."""

    llm_type = "async-only"
    loops: list[int] = []  # noqa: RUF012 - pydantic copies the default

    def _reply(self, messages: list[BaseMessage], call: Call) -> str:
        raise NotImplementedError("this model is async only")

    async def _areply(self, messages: list[BaseMessage], call: Call) -> str:
        self.loops.append(id(asyncio.get_running_loop()))
        return ASYNC_SUMMARY


def async_only_models() -> list[Any]:
    return [
        async_summarize,
        RunnableLambda(async_summarize),
        AsyncCallable(),
        ReturnsAwaitable(),
        AsyncOnlyChatModel(),
    ]


@pytest.mark.parametrize("timeout", [None, 30.0])
@pytest.mark.parametrize(
    "index", range(5), ids=["coroutine_fn", "runnable_lambda", "async_call", "awaitable", "chat"]
)
def test_an_async_only_summarizer_writes_the_summary_under_sync_compress(
    index: int, timeout: float | None
) -> None:
    model = async_only_models()[index]
    pipeline = ContextPipeline(
        threshold=2000, tail_budget=600, model=model, summary_timeout=timeout
    )
    result = pipeline.compress(condensable())
    assert result.report.condense is not None
    assert result.report.condense.failure is None
    assert result.report.summary_source == "model"
    assert ASYNC_SUMMARY in "".join(message_text(m) for m in result.messages)
    assert estimate_tokens(result.messages) <= 2000


def test_an_async_only_summarizer_keeps_one_loop_and_runs_beside_a_callers_loop() -> None:
    """The model's async clients keep the loop they started on; a caller's loop is untouched."""
    model = AsyncOnlyChatModel(loops=[])
    pipeline = ContextPipeline(threshold=2000, tail_budget=600, model=model, summary_memory=False)
    first = pipeline.compress(condensable())

    async def inside_a_running_loop() -> CompressionResult:
        return pipeline.compress(condensable())  # sync call from a coroutine

    second = asyncio.run(inside_a_running_loop())
    assert first.report.summary_source == second.report.summary_source == "model"
    assert len(model.loops) == 2 and model.loops[0] == model.loops[1]


def test_a_hung_async_only_summarizer_under_compress_times_out_and_is_cancelled() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def hangs(prompt: Sequence[BaseMessage]) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    pipeline = ContextPipeline(threshold=2000, tail_budget=600, model=hangs, summary_timeout=0.2)
    result = pipeline.compress(condensable())
    assert started.is_set()
    assert result.report.summary_source == "digest"
    assert "SummaryTimeoutError" in (result.report.condense.failure or "")
    # The coroutine does not outlive the timeout: it is cancelled on the private loop.
    assert cancelled.wait(10)


@pytest.mark.parametrize(
    ("before", "after"), [(1, True), (0, False), (1, 1.0), (0.0, -0.0), (True, 1.0)]
)
def test_a_number_replaced_by_an_equal_one_of_another_kind_is_seen(
    before: object, after: object
) -> None:
    # 1 == True == 1.0 and 0.0 == -0.0, but each is sent differently: the memo must
    # not hand out the copy it pruned from the old value.
    def history() -> list[BaseMessage]:
        call = {"name": "write", "args": {"n": before, "content": "x = 1\n" * 400}, "id": "c1"}
        return [
            HumanMessage("task", id="h"),
            AIMessage("ok", tool_calls=[call], id="a"),
            ToolMessage("done", tool_call_id="c1", id="t"),
            HumanMessage("next " * 520, id="h2"),
        ]

    # low_water=1: pruning brings this history under the threshold, and the pruned
    # call stays in the output instead of being truncated away.
    settings: dict[str, Any] = {"threshold": 900, "tail_budget": 400, "low_water": 1.0}
    pipeline = ContextPipeline(**settings)
    messages = history()
    first = pipeline.compress(messages)
    assert first.report.stages == ["prune"]  # nothing truncated: the call is in the output
    assert first.messages[1] is not messages[1]  # pruned: a copy the memo remembers
    messages[1].tool_calls[0]["args"]["n"] = after  # type: ignore[attr-defined]
    again = pipeline.compress(messages)
    fresh = ContextPipeline(**settings).compress(messages)
    value = again.messages[1].tool_calls[0]["args"]["n"]  # type: ignore[attr-defined]
    assert type(value) is type(after) and repr(value) == repr(after)
    assert snapshot(again.messages) == snapshot(fresh.messages)


def test_only_what_pruning_could_change_is_remembered() -> None:
    # Short tool results and human messages are left as they are without a snapshot
    # in the memo; a bulky result and an AI message are remembered.
    pipeline = ContextPipeline(threshold=2000, tail_budget=700)
    messages = bulky_history()
    messages.insert(4, ToolMessage("ok", tool_call_id="c1", id="t2"))
    pipeline.compress(messages)
    assert set(pipeline.pruner._memo) == {id(messages[2]), id(messages[3])}
