"""LangChain's conventions, wherever the pipeline is configured.

``SummarizationMiddleware`` takes ``trigger=("tokens", n)`` / ``("fraction", x)`` and
its model first, positionally; so does every entry point here. A threshold above the
agent model's window is warned about, and a chained ``ContextPipeline``'s trace run
carries the pass's figures, as the hook's and the middleware's do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_context_pipeline import DIGEST, ContextPipeline, PipelineSettings
from langchain_context_pipeline.core.events import METADATA_PREFIX
from langchain_context_pipeline.deepagents import DeepAgentContextMiddleware
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens.threshold import normalize_threshold
from tests.support.callbacks import RunLog
from tests.support.fakes import EchoSummarizer

LOGGER = "langchain_context_pipeline"


def agent_model(window: int | None = None) -> GenericFakeChatModel:
    profile = None if window is None else {"max_input_tokens": window}
    return GenericFakeChatModel(messages=iter([]), profile=profile)


def long_history(turns: int = 30) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("the task", id="task")]
    for i in range(turns):
        messages += [AIMessage(f"step {i} " + "x" * 2000, id=f"a{i}")]
        messages += [HumanMessage(f"go on {i}", id=f"h{i}")]
    return messages


# -- thresholds ------------------------------------------------------------------------

BUILDERS = {
    "pipeline": lambda **kw: ContextPipeline(**kw),
    "settings": lambda **kw: ContextPipeline(PipelineSettings(**kw)),
    "from_keywords": lambda **kw: ContextPipeline(PipelineSettings.from_keywords(**kw)),
    "hook": lambda **kw: create_pre_model_hook(**kw).pipeline,
    "middleware": lambda **kw: ContextPipelineMiddleware(**kw).pipeline,
    "deepagents": lambda **kw: DeepAgentContextMiddleware(**kw).pipeline,
}


@pytest.mark.parametrize("entry", sorted(BUILDERS))
@given(n=st.integers(min_value=2, max_value=10**7), tail=st.integers(min_value=0, max_value=10**6))
def test_tokens_pair_is_the_plain_count_everywhere(entry: str, n: int, tail: int) -> None:
    build = BUILDERS[entry]
    pair, plain = build(threshold=("tokens", n)), build(threshold=n)
    assert (pair.threshold, pair.tail_budget) == (plain.threshold, plain.tail_budget)
    assert pair.threshold == n
    if tail < n:
        explicit = build(threshold=("tokens", n), tail_budget=("tokens", tail))
        assert (explicit.threshold, explicit.tail_budget) == (n, tail)


@pytest.mark.parametrize("entry", ["middleware", "deepagents"])
def test_fraction_and_tokens_forms_in_the_middleware(entry: str) -> None:
    cls = ContextPipelineMiddleware if entry == "middleware" else DeepAgentContextMiddleware
    assert cls(threshold=("tokens", 5000)).threshold == 5000
    assert cls(threshold=("fraction", 0.8)).threshold == ("fraction", 0.8)
    request = ModelRequest(
        model=agent_model(10_000), messages=[HumanMessage("hi")], tools=[], state={"messages": []}
    )
    assert cls(threshold=("fraction", 0.5))._budget(request)[0] == 5000


def test_a_call_threshold_takes_the_tokens_form() -> None:
    history = long_history()
    pipeline = ContextPipeline(model=DIGEST)
    result = pipeline.compress(history, threshold=("tokens", 4000))
    assert result.report.threshold == 4000 and result.report.tokens_after <= 4000


BAD = [
    (0, "threshold", "0"),
    (("tokens", 0), "threshold", "('tokens', 0)"),
    (("tokens", 2.5), "threshold", "('tokens', 2.5)"),
    (("tokens", "5000"), "threshold", "('tokens', '5000')"),
    (("fraction", 1.5), "threshold", "('fraction', 1.5)"),
    (("messages", 40), "threshold", "('messages', 40)"),
    ("32000", "threshold", "'32000'"),
]


@pytest.mark.parametrize("entry", sorted(BUILDERS))
@pytest.mark.parametrize(("value", "name", "shown"), BAD)
def test_a_bad_threshold_names_the_argument_and_the_value(
    entry: str, value: Any, name: str, shown: str
) -> None:
    with pytest.raises(ValueError) as info:
        BUILDERS[entry](threshold=value)
    assert name in str(info.value) and shown in str(info.value)


ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.tuples(st.sampled_from(["tokens", "fraction", "messages", "x"]), st.integers()),
    st.tuples(st.sampled_from(["tokens", "fraction"]), st.floats(allow_nan=True)),
    st.tuples(st.sampled_from(["tokens", "fraction"]), st.text(max_size=3), st.integers()),
    st.lists(st.integers(), max_size=2),
)


@given(value=ANY_VALUE)
def test_any_threshold_is_a_budget_or_a_value_error_naming_it(value: Any) -> None:
    """Whatever is given, the answer is a budget or a ValueError that shows the value."""
    try:
        normalized = normalize_threshold(value)
    except ValueError as error:
        assert "threshold" in str(error) and repr(value) in str(error)
        return
    if isinstance(normalized, int):
        assert normalized >= 1
        assert normalized == (value if isinstance(value, int) else value[1])
    else:
        assert normalized[0] == "fraction" and 0 < normalized[1] <= 1


@pytest.mark.parametrize("value", [("tokens", -1), ("fraction", 0.2), 1.5, -1, -2])
def test_a_bad_tail_budget_names_the_argument_and_the_value(value: Any) -> None:
    with pytest.raises(ValueError, match="tail_budget") as info:
        ContextPipeline(threshold=8000, tail_budget=value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("entry", ["pipeline", "settings"])
def test_a_fraction_without_a_model_says_where_it_can_go(entry: str) -> None:
    with pytest.raises(ValueError, match=r"ContextPipelineMiddleware|agent_model"):
        BUILDERS[entry](threshold=("fraction", 0.8))


def test_middleware_keeps_the_threshold_of_its_settings() -> None:
    """Left out, the middleware's threshold is its settings' (it was 32000 whatever they said)."""
    settings = PipelineSettings(threshold=64_000)
    assert ContextPipelineMiddleware(settings).pipeline.threshold == 64_000
    assert ContextPipelineMiddleware(settings, threshold=9000).pipeline.threshold == 9000
    assert ContextPipelineMiddleware().pipeline.threshold == PipelineSettings().threshold


# -- the summarizer, positionally ------------------------------------------------------

POSITIONAL = {
    "pipeline": lambda first, **kw: ContextPipeline(first, **kw),
    "hook": lambda first, **kw: create_pre_model_hook(first, **kw).pipeline,
    "middleware": lambda first, **kw: ContextPipelineMiddleware(first, **kw).pipeline,
    "deepagents": lambda first, **kw: DeepAgentContextMiddleware(first, **kw).pipeline,
}


@pytest.mark.parametrize("entry", sorted(POSITIONAL))
def test_a_positional_summarizer_is_model(entry: str) -> None:
    summarizer = EchoSummarizer(calls=[])
    pipeline = POSITIONAL[entry](summarizer, threshold=4000, tail_budget=1000)
    assert pipeline.model is summarizer
    result = pipeline.compress(long_history())
    assert "condense" in result.report.stages and result.report.summary_source == "model"
    assert len(summarizer.calls) == 1
    assert POSITIONAL[entry](DIGEST, threshold=4000).condenser is not None
    assert POSITIONAL[entry](lambda text: "summary", threshold=4000).model is not None


@pytest.mark.parametrize("entry", sorted(POSITIONAL))
def test_positional_settings_still_work(entry: str) -> None:
    pipeline = POSITIONAL[entry](PipelineSettings(threshold=9000, head_count=3))
    assert (pipeline.threshold, pipeline.head_count, pipeline.model) == (9000, 3, None)


@pytest.mark.parametrize("entry", sorted(POSITIONAL))
def test_a_summarizer_given_twice_or_a_wrong_first_argument_is_refused(entry: str) -> None:
    with pytest.raises(TypeError, match="given twice"):
        POSITIONAL[entry](EchoSummarizer(), model=DIGEST)
    with pytest.raises(TypeError, match=r"PipelineSettings or the summarizer.*got dict"):
        POSITIONAL[entry]({"threshold": 8000})


# -- a threshold above the model's window ----------------------------------------------


def _request(window: int | None) -> ModelRequest[Any]:
    messages: list[Any] = [HumanMessage("hi", id="h")]
    return ModelRequest(
        model=agent_model(window), messages=messages, tools=[], state={"messages": messages}
    )


def _answer(request: ModelRequest[Any]) -> ModelResponse[Any]:
    return ModelResponse(result=[AIMessage("ok")])


async def _aanswer(request: ModelRequest[Any]) -> ModelResponse[Any]:
    return _answer(request)


@pytest.mark.parametrize("path", ["sync", "async"])
def test_middleware_warns_once_of_a_threshold_above_the_window(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    middleware = ContextPipelineMiddleware(threshold=200_000)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            if path == "sync":
                middleware.wrap_model_call(_request(128_000), _answer)
            else:
                asyncio.run(middleware.awrap_model_call(_request(128_000), _aanswer))
    warnings = [r.getMessage() for r in caplog.records if "window" in r.getMessage()]
    assert len(warnings) == 1
    assert "200000" in warnings[0] and "128000" in warnings[0]


@pytest.mark.parametrize(
    ("threshold", "window"),
    [(100_000, 128_000), (128_000, 128_000), (("fraction", 1.0), 128_000), (200_000, None)],
)
def test_no_window_warning_when_the_threshold_fits_or_the_window_is_unknown(
    threshold: Any, window: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ContextPipelineMiddleware(threshold=threshold).wrap_model_call(_request(window), _answer)
        create_pre_model_hook(
            threshold=threshold if window else 200_000, agent_model=agent_model(window)
        )
    assert "window" not in caplog.text


def test_hook_warns_of_a_threshold_above_the_agent_models_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        create_pre_model_hook(threshold=("tokens", 50_000), agent_model=agent_model(32_000))
    assert "50000" in caplog.text and "32000" in caplog.text


# -- traces of a chain -----------------------------------------------------------------


@pytest.mark.parametrize("path", ["invoke", "ainvoke", "batch", "abatch"])
def test_a_chained_pipeline_run_carries_the_report(path: str) -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
    pipeline = ContextPipeline(DIGEST, threshold=4000, tail_budget=1000)
    chain = prompt | pipeline
    log = RunLog()
    config: Any = {"callbacks": [log], "metadata": {"user": "u1"}}
    payload = {"history": long_history()}
    if path == "invoke":
        out = chain.invoke(payload, config)
    elif path == "ainvoke":
        out = asyncio.run(chain.ainvoke(payload, config))
    elif path == "batch":
        out = chain.batch([payload], config)[0]
    else:
        out = asyncio.run(chain.abatch([payload], config))[0]
    assert len(out) < len(payload["history"])
    runs = [r for r in log.chains if r.name == "ContextPipeline"]
    assert len(runs) == 1
    meta = runs[0].metadata
    assert meta["user"] == "u1"  # the caller's metadata stays
    assert meta[METADATA_PREFIX + "tokens_before"] > 4000
    assert meta[METADATA_PREFIX + "tokens_after"] <= 4000
    assert meta[METADATA_PREFIX + "stages"] == ["prune", "condense"]
    assert meta[METADATA_PREFIX + "summary_source"] == "digest"


def test_a_chained_no_op_pass_says_so() -> None:
    log = RunLog()
    ContextPipeline(threshold=100_000).invoke([HumanMessage("hi")], {"callbacks": [log]})
    (run,) = log.chains
    assert run.metadata[METADATA_PREFIX + "stages"] == []
    assert (
        run.metadata[METADATA_PREFIX + "tokens_after"]
        == run.metadata[METADATA_PREFIX + "tokens_before"]
    )
