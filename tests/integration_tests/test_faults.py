"""Summarizer faults, sync and async: the pipeline never crashes and never leaks the error.

Each fault of the matrix (raises, raises a timeout, HTTP 429 from the loopback
OpenAI-compatible stub, returns empty text, None, blocks without text, a summary
longer than what it replaces, hangs past ``summary_timeout`` in-process or over
HTTP) is run through ``compress`` and ``acompress``; each time: no exception, the
budget holds, the invariants hold, no error text is in any output message, the
digest stands in, and the report counts the failure and says why. Then the
circuit breaker (after ``failure_limit`` failures in a row the summarizer is left
alone for ``cooldown_calls`` passes, and the report says so), and 100 concurrent
``ainvoke`` calls on one pipeline object, which must give exactly the serial outputs.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from langchain_context_pipeline import CompressionResult, ContextPipeline, is_pipeline_summary
from langchain_context_pipeline.messages.marks import METADATA_KEY, SIGNATURE_FIELD
from langchain_context_pipeline.tokens.counters import message_text
from tests.integration_tests.openai_stub import OpenAIStub, StubReply
from tests.support import builders
from tests.support.fakes import Call, ReplyingChatModel
from tests.support.invariants import (
    assert_last_kept,
    assert_pairs_kept,
    assert_systems_kept,
    snapshot,
)

pytestmark = pytest.mark.integration

THRESHOLD = 4000
TAIL = 1000
TIMEOUT = 0.3
"""``summary_timeout`` for the hanging summarizers (they hang far longer)."""
SECRET = "XYZZY-4711"
"""Put in every error message and bad reply: it must never reach a message."""
LEAKS = (
    SECRET,
    "429",
    "Too Many Requests",
    "Traceback",
    "Error",
    "error",
    "Exception",
    "timed out",
    "timeout",
    "rate limit",
    "summarizer returned",
    "not smaller",
)


def without_signature(message: BaseMessage) -> str:
    """``message`` as JSON, its mark's signature left out.

    The signature is an HMAC under a key drawn at random per process: hex that
    holds "429" in about one process in seventy, which is no leak.
    """
    meta = dict(message.response_metadata)
    mark = meta.get(METADATA_KEY)
    if isinstance(mark, dict):
        meta[METADATA_KEY] = {k: v for k, v in mark.items() if k != SIGNATURE_FIELD}
    return message.model_copy(update={"response_metadata": meta}).model_dump_json()


# -- the history --------------------------------------------------------------------------


def history(turns: int = 16, seed: str = "") -> list[BaseMessage]:
    """A conversation that needs the Condenser: pruning alone leaves it over budget."""
    return builders.conversation(
        turns,
        head=[
            SystemMessage("You are a careful coding agent.", id="system"),
            HumanMessage(f"Refactor the billing module{seed}.", id="task"),
        ],
        args=lambda i: {"path": f"src/billing/part_{i}.py"},
        text=lambda i: (
            f"Reading part {i}{seed} of the billing module to see how invoices are built. " * 20
        ),
        output=lambda i: f"def invoice_{i}(order):\n    return total(order, part={i})\n" * 40,
        named_results=True,
        last=HumanMessage(f"Now write the summary of the refactor{seed}.", id="last"),
    )


def test_the_history_needs_the_condenser_and_is_free_of_leak_words() -> None:
    messages = history()
    text = "\n".join(m.model_dump_json() for m in messages)
    assert not [leak for leak in LEAKS if leak in text]
    pruned_only = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL).compress(messages)
    assert pruned_only.report.prune.tokens_after is not None
    assert pruned_only.report.prune.tokens_after > THRESHOLD


# -- the fault matrix -----------------------------------------------------------------------


class ScriptedSummarizer(ReplyingChatModel):
    """A chat model whose every reply (sync and async) comes from ``reply(prompt)``."""

    llm_type = "scripted-summarizer"
    reply: Callable[[list[BaseMessage]], AIMessage]
    calls: int = 0

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        self.calls += 1
        return self.reply(messages)

    async def _areply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        self.calls += 1
        await asyncio.sleep(0)
        return self.reply(messages)


class CallableSummarizer:
    """A plain callable summarizer (sync) or coroutine function (async) returning ``value``."""

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path
        self.calls = 0

    def __call__(self, prompt: list[BaseMessage]) -> Any:
        self.calls += 1
        if self.path == "async":

            async def answer() -> Any:
                await asyncio.sleep(0)
                return self.value

            return answer()
        return self.value


class HangingSummarizer:
    """Never answers in time: the sync path blocks on ``release``, the async one sleeps."""

    def __init__(self, release: threading.Event, path: str) -> None:
        self.release = release
        self.path = path
        self.calls = 0

    def __call__(self, prompt: list[BaseMessage]) -> Any:
        self.calls += 1
        if self.path == "async":

            async def answer() -> str:
                await asyncio.sleep(3600)  # cancelled by the timeout
                return f"too late {SECRET}"

            return answer()
        self.release.wait(60)  # released when the test ends, so no thread lingers
        return f"too late {SECRET}"


def raising(exc: BaseException) -> Callable[[list[BaseMessage]], Any]:
    def reply(prompt: list[BaseMessage]) -> Any:
        raise exc

    return reply


def longer_than_replaced(prompt: list[BaseMessage]) -> AIMessage:
    """A 'summary' twice the size of the whole transcript it was given."""
    return AIMessage(f"Summary {SECRET}: " + message_text(prompt[-1]) * 2)


@dataclass
class Run:
    result: CompressionResult
    calls: int
    """Calls the summarizer received (requests, for the HTTP stub)."""


@dataclass
class Fault:
    """One fault: how to build the summarizer, and why the report must say it failed."""

    build: Callable[[str, threading.Event], Any]
    """``(path, release) -> summarizer``, or the stub's reply for an HTTP fault."""
    reason: str
    http: bool = False

    def run(self, path: str, stub: OpenAIStub, release: threading.Event) -> Run:
        messages = history()
        before = snapshot(messages)
        if self.http:
            result = _run_http(stub, self.build(path, release), messages, path)
            calls = len(stub.chat_requests)
        else:
            model = self.build(path, release)
            pipeline = ContextPipeline(
                threshold=THRESHOLD, tail_budget=TAIL, model=model, summary_timeout=TIMEOUT
            )
            if path == "sync":
                result = pipeline.compress(messages)
            else:
                result = asyncio.run(pipeline.acompress(messages))
            calls = model.calls
        assert snapshot(messages) == before, "the input was mutated"
        assert_pairs_kept(messages, result.messages)
        assert_systems_kept(messages, result.messages)
        assert_last_kept(messages, result.messages)
        return Run(result, calls)


def _run_http(
    stub: OpenAIStub, reply: StubReply, messages: list[BaseMessage], path: str
) -> CompressionResult:
    """Compress with ChatOpenAI on the loopback stub (answering ``reply``) as the summarizer."""
    stub.default = reply

    def pipeline(**client: Any) -> ContextPipeline:
        model = ChatOpenAI(
            model="stub-summary-model",
            base_url=stub.base_url,
            api_key="test",  # type: ignore[arg-type]
            max_retries=0,
            **client,
        )
        return ContextPipeline(
            threshold=THRESHOLD, tail_budget=TAIL, model=model, summary_timeout=TIMEOUT
        )

    if path == "sync":
        with httpx.Client() as client:
            return pipeline(http_client=client).compress(messages)

    async def go() -> CompressionResult:
        async with httpx.AsyncClient() as client:
            return await pipeline(http_async_client=client).acompress(messages)

    return asyncio.run(go())


FAULTS = {
    "raises": Fault(
        lambda path, release: ScriptedSummarizer(reply=raising(RuntimeError(f"boom {SECRET}"))),
        "RuntimeError",
    ),
    "raises-timeout": Fault(
        lambda path, release: ScriptedSummarizer(
            reply=raising(TimeoutError(f"upstream timed out {SECRET}"))
        ),
        "TimeoutError",
    ),
    "http-429": Fault(
        lambda path, release: StubReply(
            status=429,
            error_message=f"Too Many Requests: rate limit reached {SECRET}",
            headers={"retry-after": "20"},
        ),
        "RateLimitError",
        http=True,
    ),
    "returns-empty": Fault(
        lambda path, release: ScriptedSummarizer(reply=lambda prompt: AIMessage("")),
        "empty text",
    ),
    "returns-whitespace": Fault(
        lambda path, release: ScriptedSummarizer(reply=lambda prompt: AIMessage("  \n\t ")),
        "empty text",
    ),
    "returns-none": Fault(lambda path, release: CallableSummarizer(None, path), "returned None"),
    "returns-blocks-without-text": Fault(
        lambda path, release: ScriptedSummarizer(
            reply=lambda prompt: AIMessage(
                [
                    {"type": "reasoning", "reasoning": f"thinking {SECRET}"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ]
            )
        ),
        "no text blocks",
    ),
    "returns-longer-than-replaced": Fault(
        lambda path, release: ScriptedSummarizer(reply=longer_than_replaced),
        "not smaller",
    ),
    "hangs": Fault(lambda path, release: HangingSummarizer(release, path), "SummaryTimeoutError"),
    "http-hangs": Fault(
        lambda path, release: StubReply(content=f"too late {SECRET}", delay=1.5),
        "SummaryTimeoutError",
        http=True,
    ),
}


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends: a hung sync summarizer's abandoned thread then returns."""
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_summarizer_fault_falls_back_to_the_digest(
    fault: str, path: str, openai_stub: OpenAIStub, release: threading.Event
) -> None:
    run = FAULTS[fault].run(path, openai_stub, release)
    result, report = run.result, run.result.report

    assert run.calls == 1, "the summarizer was not called exactly once"
    assert report.summarizer_calls == 1
    assert report.condense.summarizer_failures == 1
    assert report.condense.failure is not None and FAULTS[fault].reason in report.condense.failure
    assert report.summary_source == "digest"
    assert not report.breaker_open and report.condense.summarizer_skipped == 0
    assert "condense" in report.stages

    counter = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL).token_counter
    assert report.tokens_after == counter(result.messages) <= THRESHOLD
    (summary,) = [m for m in result.messages if is_pipeline_summary(m)]
    assert "[read_file] src/billing/part_" in message_text(summary)  # the digest's briefs
    for message in result.messages:
        dumped = without_signature(message)
        leaked = [leak for leak in LEAKS if leak in dumped]
        assert not leaked, f"{leaked} reached the output in {message.id}: {dumped[:300]}"


# -- the circuit breaker ----------------------------------------------------------------------


class Switch:
    """A callable summarizer that fails until told otherwise; sync or async."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fail = True
        self.calls = 0

    def _answer(self) -> str:
        if self.fail:
            raise ConnectionError(f"connection reset {SECRET}")
        return "The agent read every billing part; the refactor plan is settled."

    def __call__(self, prompt: list[BaseMessage]) -> Any:
        self.calls += 1
        if self.path == "async":

            async def answer() -> str:
                await asyncio.sleep(0)
                return self._answer()

            return answer()
        return self._answer()


def compress(
    pipeline: ContextPipeline, messages: list[BaseMessage], path: str
) -> CompressionResult:
    if path == "sync":
        return pipeline.compress(messages)
    return asyncio.run(pipeline.acompress(messages))


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("cooldown", [10, 2])
def test_circuit_breaker_opens_after_three_failures_then_retries(cooldown: int, path: str) -> None:
    model = Switch(path)
    pipeline = ContextPipeline(
        threshold=THRESHOLD, tail_budget=TAIL, model=model, failure_limit=3, cooldown_calls=cooldown
    )
    messages = history()

    # Three failures in a row: each is a call, counted; the third opens the breaker.
    for attempt in range(1, 4):
        report = compress(pipeline, messages, path).report
        assert model.calls == attempt
        assert report.summarizer_calls == 1 and report.condense.summarizer_failures == 1
        assert report.condense.failure is not None and "ConnectionError" in report.condense.failure
        assert report.breaker_open is (attempt == 3)
        assert report.condense.summarizer_skipped == 0

    # Open: `cooldown` passes served by the digest without a call, and the report says so.
    for skipped in range(1, cooldown + 1):
        result = compress(pipeline, messages, path)
        report = result.report
        assert model.calls == 3, "the summarizer was called while the breaker was open"
        assert report.condense.summarizer_skipped == 1
        assert report.summarizer_calls == 0 and report.condense.summarizer_failures == 0
        assert report.summary_source == "digest"
        assert report.breaker_open is (skipped < cooldown)
        assert report.tokens_after <= THRESHOLD
        assert SECRET not in "".join(m.model_dump_json() for m in result.messages)

    # Cooldown spent: the summarizer is tried again, and now it works.
    model.fail = False
    report = compress(pipeline, messages, path).report
    assert model.calls == 3 + 1
    assert report.summarizer_calls == 1 and report.condense.summarizer_failures == 0
    assert report.summary_source == "model" and not report.breaker_open


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_success_resets_the_failure_streak(path: str) -> None:
    model = Switch(path)
    # The same history again and again: without the summary memory, so that every
    # pass asks the summarizer (what the breaker counts).
    pipeline = ContextPipeline(
        threshold=THRESHOLD, tail_budget=TAIL, model=model, summary_memory=False
    )
    messages = history()
    outcomes = [True, True, False, True, True, False, True, True]  # True: it fails
    for calls, fails in enumerate(outcomes, start=1):
        model.fail = fails
        report = compress(pipeline, messages, path).report
        assert model.calls == calls, "the breaker opened without 3 failures in a row"
        assert report.condense.summarizer_failures == int(fails)
        assert not report.breaker_open


# -- 100 concurrent calls on one pipeline -------------------------------------------------------


class InterleavingSummarizer(ReplyingChatModel):
    """Async only; deterministic: the reply depends on the prompt alone.

    It yields to the event loop a prompt-dependent number of times, so that
    concurrent calls interleave, and records how many calls were in flight at once.
    """

    llm_type = "interleaving-summarizer"
    max_tokens: int | None = None
    in_flight: int = 0
    peak: int = 0
    calls: int = 0

    def _reply(self, messages: list[BaseMessage], call: Call) -> str:
        raise AssertionError("this summarizer is async only")

    async def _areply(self, messages: list[BaseMessage], call: Call) -> str:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        body = message_text(messages[-1])
        digest = hashlib.sha256(body.encode()).hexdigest()
        for _ in range(int(digest[:2], 16) % 7 + 1):
            await asyncio.sleep(0)
        self.in_flight -= 1
        paths = sorted(set(re.findall(r"src/billing/part_\d+\.py", body)))
        max_tokens = call.kwargs.get("max_tokens")
        return f"Summary {digest[:16]} ({max_tokens} tokens max): read {' '.join(paths)}"


async def test_100_concurrent_ainvoke_on_one_pipeline_equal_serial_runs() -> None:
    model = InterleavingSummarizer()
    # Each history runs twice (serial, then concurrent): without the summary memory,
    # so both runs ask the summarizer and their outputs can be compared call for call.
    pipeline = ContextPipeline(
        threshold=THRESHOLD, tail_budget=TAIL, model=model, summary_memory=False
    )
    # Different lengths and texts: some under budget, some pruned only, most condensed.
    histories = [history(turns=2 + i % 23, seed=f" #{i}") for i in range(100)]

    serial = [await pipeline.ainvoke(h) for h in histories]
    serial_calls = model.calls
    model.peak = 0
    concurrent = await asyncio.gather(*(pipeline.ainvoke(h) for h in histories))

    assert model.peak > 1, "the calls never overlapped"
    assert model.calls == 2 * serial_calls >= 2 * 60
    assert len(concurrent) == len(serial) == 100
    for i, (alone, together) in enumerate(zip(serial, concurrent, strict=True)):
        assert [m.model_dump_json() for m in together] == [m.model_dump_json() for m in alone], (
            f"history {i}: the concurrent output differs from the serial one"
        )
    distinct = {tuple(m.model_dump_json() for m in out) for out in serial}
    assert len(distinct) == 100
    condensed = [out for out in serial if any(is_pipeline_summary(m) for m in out)]
    assert len(condensed) >= 60
    for out in condensed:
        (summary,) = [m for m in out if is_pipeline_summary(m)]
        assert message_text(summary).splitlines()[1].startswith("Summary ")  # the model wrote it
