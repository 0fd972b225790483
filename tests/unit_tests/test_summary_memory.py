"""Each summary is bought once, whoever calls: an LCEL chain per turn, batch, a store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from langchain_context_pipeline import BudgetError, ContextPipeline
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.messages.marks import is_pipeline_summary
from langchain_context_pipeline.stages.summary_memory import SUMMARY_NAMESPACE, SummaryMemory
from tests.support.fakes import EchoSummarizer
from tests.support.generated import conversations

THRESHOLD = 12_000
TAIL = 3_000
TURNS = 60


def run(task: str, turns: int = TURNS) -> list[list[BaseMessage]]:
    """Return the history an agent sends at each of ``turns`` turns (it grows)."""
    history: list[BaseMessage] = [HumanMessage(f"Task: {task}", id=f"{task}-task")]
    seen = []
    for i in range(turns):
        call = {"name": "bash", "args": {"command": f"{task} step {i}"}, "id": f"{task}-c{i}"}
        history = [
            *history,
            HumanMessage(f"{task} remark {i} " + "u" * 2000, id=f"{task}-h{i}"),
            AIMessage(f"{task} thinking {i} " + "r" * 400, tool_calls=[call], id=f"{task}-a{i}"),
            ToolMessage(
                f"{task} out {i} " + "o" * 1500, tool_call_id=call["id"], id=f"{task}-t{i}"
            ),
        ]
        seen.append(history)
    return seen


def prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages([("system", "Be terse."), MessagesPlaceholder("h")])


def hook_calls(histories: list[list[BaseMessage]], *, system_prompt: bool = True) -> int:
    """The summarizer calls of the LangGraph hook on the same run (summary in state)."""
    summarizer = EchoSummarizer()
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    system = prompt().invoke({"h": []}).to_messages() if system_prompt else []
    state: dict[str, Any] = {}
    for history in histories:
        update = hook({"messages": [*system, *history], **state})
        state = {k: v for k, v in update.items() if k != "llm_input_messages"}
    return len(summarizer.calls)


def test_a_chain_called_per_turn_pays_no_more_than_the_hook() -> None:
    histories = run("alpha")
    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    chain = prompt() | pipeline | RunnableLambda(lambda m: AIMessage("ok"))
    for history in histories:
        chain.invoke({"h": history})
    baseline = hook_calls(histories)
    assert 1 <= len(summarizer.calls) <= baseline
    # Without the memory the same chain summarises the same turns over and over.
    forgetful = EchoSummarizer()
    chain = prompt() | ContextPipeline(
        threshold=THRESHOLD, tail_budget=TAIL, model=forgetful, summary_memory=False
    )
    for history in histories:
        chain.invoke({"h": history})
    assert len(forgetful.calls) > baseline


def test_an_async_chain_called_per_turn_pays_no_more_than_the_hook() -> None:
    histories = run("alpha")
    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    chain = prompt() | pipeline

    async def drive() -> None:
        for history in histories:
            await chain.ainvoke({"h": history})

    asyncio.run(drive())
    assert 1 <= len(summarizer.calls) <= hook_calls(histories)
    assert all(call["path"] == "async" for call in summarizer.calls)


def test_batch_over_interleaved_conversations_never_mixes_summaries() -> None:
    alpha, beta = run("alpha"), run("beta")
    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    chain = prompt() | pipeline
    outputs = []
    for a, b in zip(alpha, beta, strict=True):
        outputs.append(chain.batch([{"h": a}, {"h": b}]))
    # Each conversation pays for itself at most as the hook would, never for the other.
    assert len(summarizer.calls) <= hook_calls(alpha) + hook_calls(beta)
    for pair in outputs:
        for task, other, out in (("alpha", "beta", pair[0]), ("beta", "alpha", pair[1])):
            summaries = [m for m in out if is_pipeline_summary(m)]
            assert all(other not in str(m.content) for m in out), "a summary crossed over"
            assert all(task in str(m.content) for m in summaries)


def test_two_interleaved_conversations_through_one_instance_keep_their_own_summary() -> None:
    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    for a, b in zip(run("alpha"), run("beta"), strict=True):
        out_a = pipeline.invoke(a)
        out_b = pipeline.invoke(b)
        assert "beta" not in "".join(str(m.content) for m in out_a)
        assert "alpha" not in "".join(str(m.content) for m in out_b)
    baseline = hook_calls(run("alpha"), system_prompt=False)
    assert 1 <= len(summarizer.calls) <= baseline + hook_calls(run("beta"), system_prompt=False)


def test_an_edited_span_is_not_served_a_stale_summary() -> None:
    histories = run("alpha", 30)
    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer)
    for history in histories:
        pipeline.invoke(history)
    calls = len(summarizer.calls)
    assert calls >= 1
    last = histories[-1]
    edited = [last[0], last[1].model_copy(update={"content": "edited thinking"}), *last[2:]]
    out = pipeline.invoke(edited)
    assert len(summarizer.calls) == calls + 1  # a new span: a new summary
    assert any(is_pipeline_summary(m) for m in out)


class DictStore:
    """A dict with ``BaseStore``'s get/put/aget/aput, as LangGraph's stores have."""

    def __init__(self) -> None:
        self.data: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        value = self.data.get((namespace, key))
        return None if value is None else type("Item", (), {"value": value})()

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        self.data[(namespace, key)] = value

    async def aget(self, namespace: tuple[str, ...], key: str) -> Any:
        return self.get(namespace, key)

    async def aput(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        self.put(namespace, key, value)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_shared_store_lets_another_process_reuse_the_summary(use_async: bool) -> None:
    store = DictStore()
    histories = run("alpha", 30)
    first = EchoSummarizer()
    one = ContextPipeline(
        threshold=THRESHOLD,
        tail_budget=TAIL,
        model=first,
        summary_memory=SummaryMemory(store=store),
    )
    for history in histories:
        one.invoke(history)
    assert first.calls and all(key[0] == SUMMARY_NAMESPACE for key in store.data)
    second = EchoSummarizer()
    other = ContextPipeline(
        threshold=THRESHOLD,
        tail_budget=TAIL,
        model=second,
        summary_memory=SummaryMemory(store=store),
    )
    expected = one.invoke(histories[-1])
    got = asyncio.run(other.ainvoke(histories[-1])) if use_async else other.invoke(histories[-1])
    assert second.calls == []
    assert [m.content for m in got] == [m.content for m in expected]


def truncated_after_summary() -> list[BaseMessage]:
    """A history whose pass condenses, then truncates the long answer after the summary."""
    history: list[BaseMessage] = [HumanMessage("Task: fix the parser in src/parse.py", id="task")]
    for i in range(20):
        call = {"name": "bash", "args": {"command": f"cat part{i}.txt"}, "id": f"c{i}"}
        history += [
            HumanMessage(f"remark {i} " + "note " * 300, id=f"h{i}"),
            AIMessage(f"step {i}", tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"line {i} of output " * 300, tool_call_id=call["id"], id=f"t{i}"),
        ]
    history += [
        AIMessage("Here is my long analysis of the parser. " * 280, id="long"),
        HumanMessage("ok, go on", id="last"),
    ]
    return history


@pytest.mark.parametrize("other_process", [False, True])
def test_the_same_list_again_gets_the_same_request_without_a_second_summary(
    other_process: bool,
) -> None:
    # The first pass summarizes the middle, and the long answer after it no longer
    # fits beside the summary: truncation drops it. Given the same list again, the
    # remembered summary stands in for the middle and the same truncation follows:
    # the same request, no second summary (before, the list was pruned anew, and
    # the request differed from the first).
    history = truncated_after_summary()
    store = DictStore()
    summarizer = EchoSummarizer(share=1.0)

    def pipeline() -> ContextPipeline:
        memory = SummaryMemory(store=store)
        return ContextPipeline(
            threshold=4_000, tail_budget=600, head_count=1, model=summarizer, summary_memory=memory
        )

    one = pipeline()
    first = one.compress(list(history))
    assert first.report.stages == ["prune", "condense", "truncate"]
    assert "long" not in [m.id for m in first.messages]
    again = (pipeline() if other_process else one).compress(list(history))
    assert again.messages == first.messages
    assert again.report.summary_reused and again.report.stages == ["truncate"]
    assert again.report.stable_prefix == first.report.stable_prefix
    assert len(summarizer.calls) == 1
    # An edited list (the same length, another last message) is no replay of that pass.
    edited = [*history[:-1], HumanMessage("no, stop", id="last")]
    other = pipeline().compress(edited)
    assert other.report.stages[0] == "prune"


class Counting:
    """A summarizer that answers ``size`` characters and counts its calls."""

    def __init__(self, size: int) -> None:
        self.size, self.calls = size, 0

    def __call__(self, prompt: Sequence[BaseMessage]) -> str:
        self.calls += 1
        return ("The agent read the files and ran the tests. " * (self.size // 44 + 1))[: self.size]


@given(
    conversations(),
    st.integers(2_000, 40_000),
    st.floats(0, 0.9),
    st.integers(0, 3),
    st.integers(1, 20_000),
)
def test_a_list_given_again_gets_the_same_request_and_pays_nothing(
    messages: list[BaseMessage], threshold: int, tail: float, head_count: int, size: int
) -> None:
    summarizer = Counting(size)
    pipeline = ContextPipeline(
        threshold=threshold,
        tail_budget=int(tail * threshold),
        head_count=head_count,
        model=summarizer,
    )
    try:
        first = pipeline.compress(list(messages))
    except BudgetError:
        return  # the system messages alone are over: refused, as test_references checks
    paid = summarizer.calls
    # What the model wrote and the request kept is remembered. A reply the condenser
    # refused (too long: the digest stands instead) and a summary truncation then
    # dropped are not: that list again asks the model again.
    condense = first.report.condense
    assume(
        condense is None
        or (condense.source == "model" and any(is_pipeline_summary(m) for m in first.messages))
    )
    assert pipeline.invoke(list(messages)) == first.messages
    assert summarizer.calls == paid


def test_a_failing_store_costs_a_summary_not_the_call(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(DictStore):
        def get(self, namespace: tuple[str, ...], key: str) -> Any:
            raise ConnectionError("store down")

    summarizer = EchoSummarizer()
    pipeline = ContextPipeline(
        threshold=THRESHOLD,
        tail_budget=TAIL,
        model=summarizer,
        summary_memory=SummaryMemory(store=Broken()),
    )
    out = pipeline.invoke(run("alpha", 30)[-1])
    assert any(is_pipeline_summary(m) for m in out)
    assert "summary store failed (ConnectionError: store down)" in caplog.text


def test_bad_memory_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="summary_memory must be"):
        ContextPipeline(summary_memory="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="store must have BaseStore's get"):
        SummaryMemory(store=object())
    with pytest.raises(ValueError, match="max_entries"):
        SummaryMemory(max_entries=0)


def test_the_memory_is_bounded() -> None:
    memory = SummaryMemory(max_entries=2)
    for task in ("alpha", "beta", "gamma"):
        pipeline = ContextPipeline(
            threshold=THRESHOLD, tail_budget=TAIL, model=EchoSummarizer(), summary_memory=memory
        )
        pipeline.invoke(run(task, 30)[-1])
    assert len(memory) == 2
    memory.clear()
    assert len(memory) == 0


def test_a_model_free_pipeline_remembers_nothing() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL)
    assert pipeline.summary_memory is not None
    for history in run("alpha", 30):
        pipeline.invoke(history)
    assert len(pipeline.summary_memory) == 0


def test_the_store_namespaces_keep_their_persisted_values_and_former_names() -> None:
    # Summaries and archived originals already in a store are found under these.
    from langchain_context_pipeline.integrations import archive
    from langchain_context_pipeline.stages import summary_memory

    assert summary_memory.SUMMARY_NAMESPACE == ("context_pipeline", "summaries")
    assert archive.ORIGINALS_NAMESPACE == "context_pipeline_originals"
    assert summary_memory.NAMESPACE is summary_memory.SUMMARY_NAMESPACE
    assert archive.NAMESPACE is archive.ORIGINALS_NAMESPACE
    assert archive.namespace("t1") == ("context_pipeline_originals", "t1")
