from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_context_pipeline import (
    CONDENSED_TAG,
    DIGEST,
    CarriedSummary,
    ContextPipeline,
    estimate_tokens,
    is_pipeline_summary,
)
from tests.support import builders
from tests.support.fakes import EchoSummarizer, FailingModel
from tests.support.invariants import assert_pairs_kept, snapshot


def agent_history(steps: int = 40, output: int = 6000, text: int = 300) -> list[BaseMessage]:
    return builders.conversation(
        steps,
        head=[
            SystemMessage("You are a coding agent.", id="sys"),
            HumanMessage("Fix issue #42", id="task"),
        ],
        tool="bash",
        args=lambda i: {"command": f"pytest -k case{i}"},
        text=lambda i: f"step {i}: " + "r" * text,
        output=lambda i: f"case{i} " + "o" * output,
    )


def test_unchanged_under_budget_returns_the_input_list_itself() -> None:
    messages = agent_history(steps=2)
    result = ContextPipeline(threshold=32_000).compress(messages)
    assert result.messages is messages
    assert result.report.stages == [] and result.report.tokens_after == estimate_tokens(messages)
    assert ContextPipeline().invoke(messages) is messages


def test_empty_list() -> None:
    assert ContextPipeline().invoke([]) == []


def test_prune_alone_can_be_enough() -> None:
    messages = agent_history()
    # low_water=1: a compaction need only bring the request under the threshold.
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, low_water=1.0)
    result = pipeline.compress(messages)
    report = result.report
    assert report.stages == ["prune"]
    assert report.tokens_before > 16_000 >= report.tokens_after == report.prune.tokens_after
    assert report.prune.briefed > 30
    assert result.messages[3].content.startswith('[bash] "pytest -k case0" -> 1 lines output')


def test_a_compaction_that_pruning_fits_drops_nothing() -> None:
    # Pruning alone brings each compaction of this run between half the threshold and
    # the threshold: truncation is the last resort, so nothing is dropped (the
    # low-water mark is the target of a truncation, not a reason for one), and the
    # requests between compactions still append to an unchanged prefix.
    messages = agent_history()
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000)
    previous: list[BaseMessage] = []
    compactions = 0
    for end in range(4, len(messages) + 1, 2):  # one tool step more at each turn
        result = pipeline.compress(messages[:end])
        out = result.messages
        assert result.report.tokens_after <= 16_000
        assert len(out) == end and "truncate" not in result.report.stages
        if previous and out[: len(previous)] != previous:
            compactions += 1
        previous = out
    assert compactions >= 2
    assert result.report.tokens_after > 8000


def test_a_summary_is_written_only_when_pruning_cannot_fit_the_limit() -> None:
    # Pruning alone brings each compaction of this run between half the threshold and
    # the threshold: with a summarizer no call is made (the low-water mark is for
    # truncation, which costs nothing), and the requests keep every turn.
    messages = agent_history()
    model = EchoSummarizer()
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=model)
    for end in range(4, len(messages) + 1, 2):
        result = pipeline.compress(messages[:end])
        assert result.report.tokens_after <= 16_000
        assert result.report.summarizer_calls == 0
        assert "condense" not in result.report.stages
        assert len(result.messages) == end
    assert result.report.tokens_after > 8000
    assert model.calls == []


async def test_a_summary_is_written_only_when_pruning_cannot_fit_the_limit_async() -> None:
    messages = agent_history()
    model = EchoSummarizer()
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=model)
    result = await pipeline.acompress(messages)
    assert result.report.stages == ["prune"] and len(result.messages) == len(messages)
    assert 8000 < result.report.tokens_after <= 16_000
    assert model.calls == []


def test_condense_when_over_after_pruning() -> None:
    messages = agent_history(steps=60, text=1900)
    model = EchoSummarizer()
    result = ContextPipeline(threshold=16_000, tail_budget=4000, model=model).compress(messages)
    report = result.report
    assert report.stages == ["prune", "condense"]
    assert report.summarizer_calls == 1 and report.summary_source == "model"
    assert report.tokens_after <= 16_000
    assert report.condense.condensed > 0
    assert sum(is_pipeline_summary(m) for m in result.messages) == 1
    assert result.carried_summary is not None
    assert result.carried_summary.through == result.messages[
        3
    ].id or result.carried_summary.through.startswith("t")
    assert_pairs_kept(messages, result.messages)


def test_hard_truncate_without_a_model() -> None:
    messages = agent_history(steps=60, text=1900)
    result = ContextPipeline(threshold=16_000, tail_budget=4000).compress(messages)
    assert result.report.stages == ["prune", "truncate"]
    assert result.report.truncate.trimmed > 0
    assert estimate_tokens(result.messages) <= 16_000
    assert "earlier messages were removed" in str(result.messages[2].content)


def test_fallback_on_a_throwing_model_keeps_the_budget_and_counts_it() -> None:
    messages = agent_history(steps=60, text=1900)
    result = ContextPipeline(threshold=16_000, tail_budget=4000, model=FailingModel()).compress(
        messages
    )
    assert (
        result.report.condense.summarizer_failures == 1 and result.report.summary_source == "digest"
    )
    assert estimate_tokens(result.messages) <= 16_000
    assert not any("rate limited" in str(m.content) for m in result.messages)


def test_report_as_dict_is_json_ready() -> None:
    import json

    # Outputs of 2,000 chars: the newest unit leaves room for a summary beside it.
    result = ContextPipeline(threshold=4000, tail_budget=1000, model=DIGEST).compress(
        agent_history(output=2000)
    )
    assert result.report.stages[:2] == ["prune", "condense"]
    data = result.report.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert set(data) >= {"threshold", "limit", "tokens_before", "stages", "prune", "condense"}
    assert set(data["prune"]) >= {"briefed", "tokens_after"}
    assert set(data["condense"]) >= {"tokens_after", "summarizer_calls", "summarizer_failures"}


def test_carried_summary_is_reused_without_calling_the_model_again() -> None:
    model = EchoSummarizer()
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=model)
    history = agent_history(steps=60, text=1900)
    first = pipeline.compress(history)
    assert len(model.calls) == 1 and first.carried_summary is not None
    data = first.carried_summary.to_dict()
    assert data["tokens"] == estimate_tokens([first.carried_summary.message])
    assert data["through"] == first.carried_summary.through
    stored = CarriedSummary.from_dict(data)
    history.append(HumanMessage("one more thing", id="more"))
    second = pipeline.compress(history, carried_summary=stored)
    assert len(model.calls) == 1
    assert second.report.summary_reused
    assert second.messages[2].content == first.carried_summary.message.content
    assert second.messages[-1].id == "more"
    assert estimate_tokens(second.messages) <= 16_000


def test_carried_summary_that_does_not_match_is_ignored() -> None:
    history = agent_history(steps=2)
    stale = CarriedSummary(HumanMessage(CONDENSED_TAG + "\nold"), through="not-here")
    result = ContextPipeline().compress(history, carried_summary=stale)
    assert result.messages is history and not result.report.summary_reused


def test_carried_summary_from_dict_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a running summary"):
        CarriedSummary.from_dict({"text": "x"})


def test_accepts_prompt_value_dicts_and_tuples() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "s"), MessagesPlaceholder("history")])
    value = prompt.invoke({"history": [("human", "hi"), ("ai", "hello")]})
    assert [m.type for m in ContextPipeline().invoke(value)] == ["system", "human", "ai"]
    out = ContextPipeline().invoke([{"role": "user", "content": "hi"}, ("ai", "yo"), "plain"])
    assert [m.type for m in out] == ["human", "ai", "human"]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([HumanMessage("a"), 3.5], r"messages\[1\] is float"),
        ([HumanMessage("a"), HumanMessage("b"), None], r"messages\[2\] is NoneType"),
        ([{"role": "wizard", "content": "x"}], r"messages\[0\] cannot be read"),
        (HumanMessage("single"), "expected a list of messages"),
        (42, "expected a list of messages"),
    ],
)
def test_bad_input_names_the_item(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        ContextPipeline().invoke(value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"threshold": 1000, "tail_budget": 1000}, "tail_budget"),
        ({"threshold": 0}, "threshold"),
        ({"head_count": -1}, "head_count"),
        ({"tool_output_limit": -1}, "tool_output_limit"),
        ({"model": "gpt-4o"}, "digest"),
    ],
)
def test_inconsistent_settings_raise(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ContextPipeline(**kwargs)


def test_lcel_chain_prompt_pipeline_model() -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history")]
    )
    model = FakeMessagesListChatModel(responses=[AIMessage("done")])
    seen: list[list[BaseMessage]] = []

    def spy(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(messages)
        return messages

    chain = prompt | ContextPipeline(threshold=8000, tail_budget=2000, model=DIGEST) | spy | model
    answer = chain.invoke({"history": agent_history()[1:]})
    assert answer.content == "done"
    assert estimate_tokens(seen[0]) <= 8000


def test_batch_and_abatch() -> None:
    pipeline = ContextPipeline(threshold=8000, tail_budget=2000)
    histories = [agent_history(steps=n) for n in (1, 10, 30)]
    outs = pipeline.batch(histories)
    assert outs[0] is not None and len(outs) == 3
    assert all(estimate_tokens(o) <= 8000 for o in outs)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_sync_and_async_compress_agree_except_for_the_model_call(mode: str) -> None:
    model = EchoSummarizer()
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=model)
    history = agent_history(steps=60, text=1900)
    result = pipeline.compress(history) if mode == "sync" else await pipeline.acompress(history)
    summary = next(m for m in result.messages if is_pipeline_summary(m))
    assert str(summary.content).startswith(f"{CONDENSED_TAG}\n{mode}: ")
    other = ContextPipeline(threshold=16_000, tail_budget=4000, model=EchoSummarizer())
    twin = await other.acompress(history) if mode == "sync" else other.compress(history)
    strip = [str(m.content).replace("async: ", "").replace("sync: ", "") for m in result.messages]
    assert strip == [
        str(m.content).replace("async: ", "").replace("sync: ", "") for m in twin.messages
    ]


def test_input_not_mutated_across_all_stages() -> None:
    history = agent_history(steps=60, text=3000)
    before = snapshot(history)
    ContextPipeline(threshold=8000, tail_budget=2000, model=EchoSummarizer()).compress(history)
    assert snapshot(history) == before


def test_custom_token_counter_is_used_for_the_budget() -> None:
    def words(messages: list[BaseMessage]) -> int:
        return sum(len(str(m.content).split()) + 3 for m in messages)

    history = [HumanMessage("task")] + [HumanMessage("w " * 300) for _ in range(20)]
    out = ContextPipeline(threshold=1000, tail_budget=200, token_counter=words).invoke(history)
    assert words(out) <= 1000


def test_circuit_breaker_stops_calling_a_failing_summarizer_then_retries() -> None:
    model = FailingModel()
    pipeline = ContextPipeline(
        threshold=16_000, tail_budget=4000, model=model, failure_limit=3, cooldown_calls=2
    )
    history = agent_history(steps=60, text=1900)
    reports = [pipeline.compress(history).report for _ in range(6)]
    assert model.calls == 4  # three failures, two skipped passes, then one retry
    assert [r.summarizer_calls for r in reports] == [1, 1, 1, 0, 0, 1]
    assert [r.condense.summarizer_skipped for r in reports] == [0, 0, 0, 1, 1, 0]
    assert [r.breaker_open for r in reports] == [False, False, True, True, False, False]
    assert all(r.tokens_after <= 16_000 and r.summary_source == "digest" for r in reports)


def test_a_success_resets_the_failure_count() -> None:
    replies = iter(["boom", "boom", "ok summary", "boom", "boom", "ok summary"])

    def flaky(prompt: object) -> str:
        reply = next(replies)
        if reply == "boom":
            raise TimeoutError("upstream timeout")
        return reply

    # The same history six times: with no summary memory, each call asks again.
    pipeline = ContextPipeline(
        threshold=16_000, tail_budget=4000, model=flaky, failure_limit=3, summary_memory=False
    )
    history = agent_history(steps=60, text=1900)
    reports = [pipeline.compress(history).report for _ in range(6)]
    assert [r.summarizer_calls for r in reports] == [1] * 6
    assert not any(r.breaker_open for r in reports)


def test_no_summary_is_paid_for_when_what_must_be_kept_fills_the_budget() -> None:
    model = EchoSummarizer()
    history = agent_history(steps=20)
    history.append(ToolMessage("z" * 200_000, tool_call_id="c19-late"))
    history.insert(-1, AIMessage("", tool_calls=[{"name": "cat", "args": {}, "id": "c19-late"}]))
    result = ContextPipeline(threshold=8000, tail_budget=2000, model=model).compress(history)
    assert model.calls == []
    assert result.report.stages == ["prune", "truncate"]
    assert estimate_tokens(result.messages) <= 8000


def test_a_summary_is_held_to_the_room_truncation_leaves_it() -> None:
    """A summary beside a newest message that nearly fills the budget is kept and carried.

    Sized by the summary ratio alone, it left the list just over budget and
    truncation dropped it: a paid summary lost, and nothing carried to the next turn.
    """

    def summarise(prompt: Sequence[BaseMessage]) -> str:
        return "The user asked about the parser and the tests; the agent read files. " * 12

    history: list[BaseMessage] = [HumanMessage("Fix the failing parser tests.", id="task")]
    history += [
        HumanMessage(f"Turn {i}: the parser fails on nested lists again. " * 8, id=f"m{i}")
        for i in range(8)
    ]
    history.append(HumanMessage("Here is the full log of the last run line by line. " * 60))
    pipeline = ContextPipeline(
        threshold=1000, tail_budget=800, head_count=1, model=summarise, min_summary_tokens=50
    )
    result = pipeline.compress(history)
    assert result.report.stages == ["prune", "condense"]
    assert result.carried_summary is not None
    assert result.carried_summary.message in result.messages
    assert estimate_tokens(result.messages) <= 1000


@pytest.mark.parametrize("model", [None, DIGEST])
def test_a_pass_prunes_once_first_call_and_steady_state(
    model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_context_pipeline.stages.pruner import Pruner

    calls: list[int] = []
    prune_each = Pruner.prune_each

    def counted(self: Pruner, messages: Sequence[BaseMessage], where: Any) -> Any:
        calls.append(len(messages))
        return prune_each(self, messages, where)

    monkeypatch.setattr(Pruner, "prune_each", counted)
    messages = agent_history(steps=60, text=1900)
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=model)
    first = pipeline.compress(messages[:-10])
    assert len(calls) == 1 and "prune" in first.report.stages
    calls.clear()
    grown = pipeline.compress(messages)
    assert calls == [len(messages)]
    assert grown.report.stages[-1] == "truncate" or model is not None
    again = pipeline.compress(messages)  # the steady state: the same list again
    assert len(calls) == 2
    assert again.messages == grown.messages
    assert again.report.stages == grown.report.stages and again.report.prune == grown.report.prune


def test_the_report_keeps_the_reserved_tokens_and_the_limit_apart() -> None:
    messages = agent_history(steps=60, text=1900)
    pipeline = ContextPipeline(threshold=16_000, tail_budget=4000)
    report = pipeline.compress(messages, reserved_tokens=1_500).report
    assert (report.threshold, report.reserved, report.limit) == (16_000, 1_500, 14_500)
    assert report.tokens_after <= report.limit
    under = pipeline.compress(messages[:2], reserved_tokens=100).report
    assert (under.reserved, under.limit, under.stages) == (100, 15_900, [])
    data = report.as_dict()
    assert (data["limit"], data["reserved"]) == (14_500, 1_500)
    with pytest.raises(ValueError, match="reserved_tokens"):
        pipeline.compress(messages, reserved_tokens="many")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["bogus", "Minimal", None])
def test_an_unknown_over_budget_is_an_error_before_any_work(value: Any) -> None:
    pipeline = ContextPipeline(threshold=1_000)
    small = [HumanMessage("hi")]  # under the budget: it would pass unchecked
    for messages in (small, [HumanMessage("word " * 2_000)]):
        with pytest.raises(ValueError, match=r"over_budget must be 'raise' or 'minimal', got"):
            pipeline.compress(messages, over_budget=value)
    assert small == [HumanMessage("hi")]
