"""The LangGraph pre-model hook: arguments, modes, the running summary, graph wiring."""

from __future__ import annotations

import logging
import math
from typing import Any, get_type_hints

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    BaseMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langchain_context_pipeline import (
    BudgetError,
    ContextPipeline,
    estimate_tokens,
    is_pipeline_summary,
)
from langchain_context_pipeline.langgraph import (
    DEFAULT_SUMMARY_KEY,
    ContextPipelineHook,
    ContextPipelineState,
    create_pre_model_hook,
)
from langchain_context_pipeline.stages.model_call import RUN_NAME
from langchain_context_pipeline.stages.model_call import TAG_NOSTREAM as CORE_TAG_NOSTREAM
from langchain_context_pipeline.tokens.calibration import CALIBRATION_STATE_KEY
from langchain_context_pipeline.tokens.threshold import resolve_threshold
from tests.support.builders import unprunable_conversation as conversation
from tests.support.callbacks import Recorder
from tests.support.fakes import EchoSummarizer
from tests.support.invariants import orphans, unanswered

THRESHOLD = 6000
TAIL = 2000


def fake_model(profile: dict[str, Any] | None = None) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]), profile=profile)


def hook_with(summarizer: Any, **kwargs: Any) -> ContextPipelineHook:
    return create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, model=summarizer, **kwargs)


# -- arguments ------------------------------------------------------------------------------


def test_mode_must_be_known() -> None:
    with pytest.raises(ValueError, match="mode must be 'ephemeral' or 'persist'"):
        create_pre_model_hook(mode="rewrite")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", "messages", "llm_input_messages", "has space", 3])
def test_summary_key_must_be_a_free_identifier(key: Any) -> None:
    with pytest.raises(ValueError, match="summary_key"):
        create_pre_model_hook(summary_key=key)


def test_a_pipeline_or_its_settings_not_both() -> None:
    pipeline = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL)
    with pytest.raises(ValueError, match="either a ContextPipeline or its settings"):
        create_pre_model_hook(pipeline, threshold=9000)
    with pytest.raises(ValueError, match="either a ContextPipeline or its settings"):
        create_pre_model_hook(pipeline, agent_model=fake_model({"max_input_tokens": 9}))
    with pytest.raises(TypeError, match="must be a ContextPipeline, PipelineSettings or the"):
        create_pre_model_hook(42)
    # A string there is a summarizer's name, checked as model= checks it.
    with pytest.raises(ValueError, match="model='pipeline': a model name must be"):
        create_pre_model_hook("pipeline")
    assert create_pre_model_hook(pipeline).pipeline is pipeline


def test_pipeline_settings_are_checked_by_the_pipeline() -> None:
    with pytest.raises(ValueError, match="tail_budget"):
        create_pre_model_hook(threshold=1000, tail_budget=1000)
    with pytest.raises(TypeError):
        create_pre_model_hook(threshold=1000, tail_budgets=10)


def test_fraction_threshold_is_a_share_of_the_agent_models_window() -> None:
    model = fake_model({"max_input_tokens": 128_000})
    hook = create_pre_model_hook(threshold=("fraction", 0.8), agent_model=model)
    assert hook.pipeline.threshold == 102_400
    assert resolve_threshold(("fraction", 0.333), model) == math.floor(128_000 * 0.333)


def test_fraction_threshold_needs_the_agent_model() -> None:
    with pytest.raises(ValueError, match=r"agent_model=") as info:
        create_pre_model_hook(threshold=("fraction", 0.8))
    assert "profile['max_input_tokens']" in str(info.value)


@pytest.mark.parametrize("profile", [None, {}, {"max_input_tokens": 0}])
def test_fraction_threshold_needs_a_known_window(profile: dict[str, Any] | None) -> None:
    with pytest.raises(ValueError, match=r"does not declare") as info:
        create_pre_model_hook(threshold=("fraction", 0.8), agent_model=fake_model(profile))
    message = str(info.value)
    assert "GenericFakeChatModel" in message and "int threshold" in message


@pytest.mark.parametrize(
    "threshold",
    [
        0,
        -5,
        True,
        12.5,
        "8000",
        ("fraction",),
        ("fraction", 0),
        ("fraction", 1.5),
        ("fraction", True),
        ("fraction", float("nan")),
        ("tokens", 0),
        ("tokens", "5000"),
        ("tokens", 5000.0),
        ("messages", 50),
        ["fraction", 0.5],
    ],
)
def test_malformed_thresholds_are_refused(threshold: Any) -> None:
    with pytest.raises(ValueError, match="threshold"):
        create_pre_model_hook(threshold=threshold, agent_model=fake_model({"max_input_tokens": 9}))


# -- ephemeral mode ---------------------------------------------------------------------------


def test_ephemeral_under_budget_still_writes_llm_input_messages() -> None:
    hook = hook_with(EchoSummarizer())
    messages = conversation(1)
    update = hook({"messages": messages})
    # Written on every call (the channel persists), never empty, never the state's own list.
    # The calibration records what was sent, for the next call to compare with usage.
    assert update.pop("context_pipeline_calibration")["after"] == messages[-1].id
    assert update == {"llm_input_messages": messages}
    assert update["llm_input_messages"] is not messages


def test_ephemeral_over_budget_keeps_and_reuses_a_carried_summary() -> None:
    summarizer = EchoSummarizer()
    hook = hook_with(summarizer)
    messages = conversation(12)
    first = hook({"messages": messages})
    assert len(summarizer.calls) == 1
    sent = first["llm_input_messages"]
    assert estimate_tokens(sent) <= THRESHOLD
    assert not orphans(sent) and not unanswered(sent)
    stored = first["context_pipeline_summary"]
    (summary,) = [m for m in sent if is_pipeline_summary(m)]
    assert stored["id"] == summary.id

    # Next turn: one more step. The stored summary covers the old turns: no new call.
    state = {"messages": [*messages, *conversation(1, start=12)], **first}
    second = hook(state)
    assert len(summarizer.calls) == 1
    assert "context_pipeline_summary" not in second  # unchanged, so not rewritten
    again = second["llm_input_messages"]
    assert [m.id for m in again if is_pipeline_summary(m)] == [summary.id]
    assert again[-1].id == "t12"
    assert estimate_tokens(again) <= THRESHOLD


def test_carried_summary_is_recovered_from_llm_input_messages() -> None:
    """Without the summary key, the summary the model saw last is still in state."""
    summarizer = EchoSummarizer()
    hook = hook_with(summarizer)
    messages = conversation(12)
    first = hook({"messages": messages})
    state = {
        "messages": [*messages, *conversation(1, start=12)],
        "llm_input_messages": first["llm_input_messages"],
    }
    second = hook(state)
    assert len(summarizer.calls) == 1
    assert second["context_pipeline_summary"] == first["context_pipeline_summary"]


def test_a_broken_stored_summary_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    summarizer = EchoSummarizer()
    hook = hook_with(summarizer)
    with caplog.at_level(logging.WARNING, logger="langchain_context_pipeline"):
        update = hook({"messages": conversation(12), "context_pipeline_summary": {"text": "x"}})
    assert "ignoring state['context_pipeline_summary']" in caplog.text
    assert len(summarizer.calls) == 1
    assert update["context_pipeline_summary"]["text"] != "x"


def test_custom_summary_key() -> None:
    hook = hook_with(EchoSummarizer(), summary_key="my_summary")
    update = hook({"messages": conversation(12)})
    assert "my_summary" in update and "context_pipeline_summary" not in update


def test_hook_needs_messages() -> None:
    with pytest.raises(ValueError, match="'messages' key"):
        hook_with(EchoSummarizer())({"llm_input_messages": []})


async def test_async_hook_awaits_the_summarizer() -> None:
    summarizer = EchoSummarizer()
    hook = hook_with(summarizer)
    update = await hook.ainvoke({"messages": conversation(12)})
    assert [call["path"] for call in summarizer.calls] == ["async"]
    assert estimate_tokens(update["llm_input_messages"]) <= THRESHOLD


# -- persist mode -----------------------------------------------------------------------------


def test_persist_under_budget_changes_nothing() -> None:
    hook = hook_with(EchoSummarizer(), mode="persist")
    messages = conversation(1)
    update = hook({"messages": messages})
    # Only the record of what is sent, which the reply's usage calibrates.
    assert set(update) == {CALIBRATION_STATE_KEY}
    assert update[CALIBRATION_STATE_KEY]["at"] == len(messages)


def test_persist_over_budget_rewrites_messages_keeping_ids() -> None:
    hook = hook_with(EchoSummarizer(), mode="persist")
    messages = conversation(12)
    update = hook({"messages": messages})
    # Beside the messages, the private key records which of them is the summary.
    assert set(update) == {"messages", DEFAULT_SUMMARY_KEY, CALIBRATION_STATE_KEY}
    remove, *kept = update["messages"]
    assert [m.id for m in kept if is_pipeline_summary(m)] == [update[DEFAULT_SUMMARY_KEY]["id"]]
    assert isinstance(remove, RemoveMessage) and remove.id == REMOVE_ALL_MESSAGES
    ids = {m.id for m in messages}
    for message in kept:
        assert message.id in ids or is_pipeline_summary(message)
    # add_messages applies it as a replacement of the whole history.
    state = add_messages(messages, update["messages"])
    assert [m.id for m in state] == [m.id for m in kept]
    assert estimate_tokens(state) <= THRESHOLD
    # Persisted and compressed once, the next call has nothing to change.
    assert set(hook({"messages": state})) == {CALIBRATION_STATE_KEY}


# -- system messages over the budget by themselves --------------------------------------------


def over_budget_history() -> list[BaseMessage]:
    big = SystemMessage("Follow the house rules. " * 1600, id="rules")
    return [big, *conversation(3)]


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_ephemeral_system_messages_over_budget_send_the_smallest_request(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    hook = hook_with(EchoSummarizer())
    history = over_budget_history()
    state = {"messages": history}
    update = hook.invoke(state) if path == "sync" else await hook.ainvoke(state)
    sent = update["llm_input_messages"]
    assert sent[0] is history[0]  # the system message whole
    assert [m.id for m in sent[-2:]] == ["a2", "t2"]  # the newest call with its result
    assert not orphans(sent) and not unanswered(sent)
    assert estimate_tokens(sent[-2:]) < estimate_tokens(history[-2:]) // 5
    assert "system message(s) alone take" in caplog.text
    assert "smallest valid request" in caplog.text


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_persist_system_messages_over_budget_raise_a_budget_error(path: str) -> None:
    """Persisted, the smallest request would replace the history for good: the error stands."""
    hook = hook_with(EchoSummarizer(), mode="persist")
    state = {"messages": over_budget_history()}
    with pytest.raises(BudgetError, match=r"system message\(s\) alone take \d+ tokens"):
        if path == "sync":
            hook.invoke(state)
        else:
            await hook.ainvoke(state)


# -- the graph sees the hook's state keys -----------------------------------------------------


@pytest.mark.parametrize("key", ["context_pipeline_summary", "my_summary"])
def test_hook_adds_its_state_keys_to_any_graph(key: str) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("compress", hook_with(EchoSummarizer(), summary_key=key))
    builder.add_edge(START, "compress")
    graph = builder.compile()
    assert {"messages", "llm_input_messages", key} <= set(graph.channels)
    update = graph.invoke({"messages": conversation(12)})
    assert len(update["messages"]) == 25  # the history itself is untouched


def test_context_pipeline_state_types_the_summary_key() -> None:
    hints = get_type_hints(ContextPipelineState)
    assert {"messages", "remaining_steps", "context_pipeline_summary"} <= set(hints)


# -- tracing: the summarizer's run ------------------------------------------------------------


def test_core_tag_is_langgraphs_nostream_tag() -> None:
    assert CORE_TAG_NOSTREAM == TAG_NOSTREAM


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_summarizer_run_is_named_and_kept_out_of_the_stream(path: str) -> None:
    recorder = Recorder()
    hook = hook_with(EchoSummarizer())
    config: Any = {"callbacks": [recorder], "tags": ["user-tag"]}
    state = {"messages": conversation(12)}
    if path == "sync":
        hook.invoke(state, config)
    else:
        await hook.ainvoke(state, config)
    assert "context_pipeline_hook" in recorder.chain_runs
    (run,) = recorder.chat_runs
    name, tags = run
    assert name == RUN_NAME == "context_condenser"
    assert TAG_NOSTREAM in tags and "user-tag" in tags
