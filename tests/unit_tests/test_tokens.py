from __future__ import annotations

import sys
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_pipeline import (
    ContextPipeline,
    estimate_tokens,
    resolve_token_counter,
    tiktoken_counter,
)
from langchain_context_pipeline.tokens import estimate as _text_cost
from langchain_context_pipeline.tokens.counters import (
    FILE_TOKENS,
    IMAGE_TOKENS,
    countable_parts,
    counting_model,
    reset_counting_model,
    text_counter,
)
from langchain_context_pipeline.tokens.estimate import text_tokens
from langchain_context_pipeline.tokens.memo import Memo


def test_text_estimate_plus_four_per_message() -> None:
    assert estimate_tokens([HumanMessage("x" * 10)]) == text_tokens("x" * 10) + 4
    assert estimate_tokens([HumanMessage("")]) == 4
    two = [HumanMessage("abcd"), HumanMessage("abcde")]
    assert estimate_tokens(two) == text_tokens("abcd") + 4 + text_tokens("abcde") + 4


def test_empty_list_costs_nothing() -> None:
    assert estimate_tokens([]) == 0


def test_image_block_counts_1600() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 90_000}}
    message = HumanMessage([{"type": "text", "text": "look"}, image])
    assert estimate_tokens([message]) == text_tokens("look") + 4 + IMAGE_TOKENS


def test_tool_calls_count_the_same_for_string_and_block_content() -> None:
    call = {"name": "write_file", "args": {"path": "a.py", "content": "y = 1\n" * 800}, "id": "c1"}
    as_string = AIMessage("", tool_calls=[call])
    as_blocks = AIMessage(
        [{"type": "tool_use", "id": "c1", "name": "write_file", "input": call["args"]}],
        tool_calls=[call],
    )
    assert estimate_tokens([as_string]) > 1000
    assert estimate_tokens([as_blocks]) == estimate_tokens([as_string])


def test_block_content_with_tool_calls_not_undercounted_like_langchain_core() -> None:
    call = {"name": "write_file", "args": {"content": "y = 1\n" * 1600}, "id": "c1"}
    message = AIMessage([{"type": "text", "text": "writing"}], tool_calls=[call])
    ours = estimate_tokens([message])
    assert ours >= 2000
    # langchain_core skips tool calls when the content is a list of blocks.
    assert count_tokens_approximately([message]) < ours / 2


def test_invalid_tool_calls_are_counted() -> None:
    message = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "bash", "args": "{not json" + "z" * 400, "id": "c9", "error": None}
        ],
    )
    assert estimate_tokens([message]) >= 100


def test_resolve_named_counters() -> None:
    messages = [HumanMessage("hello world " * 20), ToolMessage("out " * 50, tool_call_id="c")]
    assert resolve_token_counter(None) is estimate_tokens
    assert resolve_token_counter("estimate") is estimate_tokens
    assert resolve_token_counter("approximate")(messages) == count_tokens_approximately(messages)
    assert resolve_token_counter("tiktoken")(messages) > 0


def test_the_tiktoken_name_counts_the_reply_priming() -> None:
    # A request the provider counts at tiktoken's count plus 3 tokens of reply
    # priming: counted without them, a request at the threshold was 3 tokens over.
    messages = [HumanMessage("hello world " * 20), ToolMessage("out " * 50, tool_call_id="c")]
    plain = tiktoken_counter()
    assert resolve_token_counter("tiktoken")(messages) == plain(messages) + 3
    assert resolve_token_counter("tiktoken")([]) == 0
    threshold = plain(messages) + 1  # fits without the priming, not with it
    report = (
        ContextPipeline(threshold=threshold, token_counter="tiktoken")
        .compress(messages, over_budget="minimal")
        .report
    )
    assert report.tokens_before == threshold + 2
    assert report.stages != []


class WordCountingModel(GenericFakeChatModel):
    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return sum(len(str(m.content).split()) for m in messages)


def test_resolve_model_counter_uses_get_num_tokens() -> None:
    counter = resolve_token_counter(WordCountingModel(messages=iter([])))
    assert counter([HumanMessage("one two three"), HumanMessage("four")]) == 4


def test_resolve_callable_and_errors() -> None:
    def count(messages: object) -> int:
        return 7

    assert resolve_token_counter(count)([HumanMessage("x")]) == 7
    with pytest.raises(ValueError, match="unknown name 'words'"):
        resolve_token_counter("words")
    with pytest.raises(TypeError, match="token_counter must be"):
        resolve_token_counter(42)


def test_tiktoken_counter_counts_tool_calls_and_images() -> None:
    count = tiktoken_counter()
    call = {"name": "bash", "args": {"command": "ls -la " * 50}, "id": "c1"}
    plain = count([AIMessage("")])
    assert count([AIMessage("", tool_calls=[call])]) > plain + 50
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    assert count([HumanMessage([image])]) == 4 + IMAGE_TOKENS


# -- every counter counts every block kind ------------------------------------------

_THINKING = "Let me weigh the options for the migration step by step. " * 1400  # ~80k chars
_BLOCK_MESSAGES = {
    "thinking": AIMessage(
        [{"type": "thinking", "thinking": _THINKING, "signature": "sig"}, "done"]
    ),
    "redacted_thinking": AIMessage([{"type": "redacted_thinking", "data": _THINKING}]),
    "reasoning": AIMessage(
        [{"type": "reasoning", "summary": [{"type": "summary_text", "text": _THINKING}]}]
    ),
    "v1_reasoning": AIMessage([{"type": "reasoning", "reasoning": _THINKING}]),
    "tool_use": AIMessage(
        [{"type": "tool_use", "id": "u1", "name": "w", "input": {"t": _THINKING}}]
    ),
    "function_call": AIMessage(
        [{"type": "function_call", "call_id": "f", "name": "w", "arguments": _THINKING}]
    ),
    "tool_result": HumanMessage(
        [
            {
                "type": "tool_result",
                "tool_use_id": "u1",
                "content": [{"type": "text", "text": _THINKING}],
            }
        ]
    ),
    "json": HumanMessage([{"type": "json", "json": {"notes": _THINKING}}]),
    "text_document": HumanMessage(
        [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": _THINKING},
            }
        ]
    ),
    "invalid_tool_call": AIMessage(
        "", invalid_tool_calls=[{"name": "w", "args": _THINKING, "id": "b", "error": None}]
    ),
}


class CharsOverFourModel(GenericFakeChatModel):
    """A model whose own counter reads string content only, as most do."""

    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return sum(len(m.content) // 4 + 3 for m in messages if isinstance(m.content, str))


@pytest.mark.parametrize("kind", sorted(_BLOCK_MESSAGES))
@pytest.mark.parametrize("counter", ["estimate", "tiktoken", "model"])
def test_every_counter_counts_every_block_kind(kind: str, counter: str) -> None:
    # Regression (issue 10, item 3): tiktoken_counter read text blocks only, so an
    # 80,000-char Anthropic thinking block counted 5 tokens.
    count = (
        resolve_token_counter(CharsOverFourModel(messages=iter([])))
        if counter == "model"
        else resolve_token_counter(counter)
    )
    tokens = count([_BLOCK_MESSAGES[kind]])
    assert tokens >= 14_000, f"{kind} by {counter}: {tokens}"


def test_binary_file_blocks_cost_a_fixed_amount() -> None:
    pdf = {"type": "file", "base64": "JVBERi0" * 100_000, "mime_type": "application/pdf"}
    message = HumanMessage([{"type": "text", "text": "read this"}, pdf])
    assert estimate_tokens([message]) == text_tokens("read this") + 4 + FILE_TOKENS
    assert countable_parts(message) == (["read this"], FILE_TOKENS)


def test_a_tool_call_in_both_places_counts_once() -> None:
    call = {"name": "w", "args": {"t": "x = 1\n" * 500}, "id": "u1"}
    block = {"type": "tool_use", "id": "u1", "name": "w", "input": call["args"]}
    texts, _ = countable_parts(AIMessage([block], tool_calls=[call]))
    assert len(texts) == 1


def test_model_counter_by_name_needs_a_model_for_the_call() -> None:
    count = resolve_token_counter("model")
    with pytest.raises(RuntimeError, match="agent's model"):
        count([HumanMessage("hi")])
    token = counting_model(CharsOverFourModel(messages=iter([])))
    try:
        assert count([HumanMessage("x" * 40)]) == 13
    finally:
        reset_counting_model(token)


def _counted_from_parts(message: AIMessage | HumanMessage) -> int:
    """The estimate by its definition: every countable part, each counted afresh."""
    texts, fixed = countable_parts(message)
    return sum(_text_cost._estimate(t) for t in texts if t) + fixed + 4


def test_a_history_of_thousands_of_distinct_strings_is_counted_from_the_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # More distinct strings than a count-bounded memo held: looked up in order, every
    # one of them was its least recently used entry, so every call missed.
    history = [HumanMessage(f"message {i}: " + "some words of text " * 10) for i in range(6_000)]
    total = estimate_tokens(history)
    calls: list[str] = []
    counting = _text_cost._estimate_memo._estimate

    def counted(text: str) -> int:
        calls.append(text)
        return counting(text)

    monkeypatch.setattr(_text_cost._estimate_memo, "_estimate", counted)
    assert estimate_tokens(history) == total
    assert calls == []


def test_the_memo_holds_at_most_its_budget_and_answers_like_the_estimate() -> None:
    memo: Memo[str, int] = Memo(len, 20_000)
    texts = [f"{i:05d}" * (i % 50 + 1) for i in range(2_000)] + ["x" * 30_000]
    for _ in range(2):
        for text in texts:
            assert memo[text] == len(text)
            held = [*memo, *memo._old]
            assert sum(sys.getsizeof(t) + 100 for t in held) <= 20_000
    assert "x" * 30_000 not in memo and "x" * 30_000 not in memo._old  # above half: never held
    memo.cache_clear()
    assert memo.held == 0


@pytest.mark.parametrize(
    "values",
    [(1, True, 1.0, "1"), (0, False, 0.0, -0.0, None), (10**20, 1e20), (2**80, float(2**80))],
)
def test_equal_arguments_with_different_json_are_each_counted_by_their_own_text(
    values: tuple[Any, ...],
) -> None:
    # 1 == True == 1.0 and 0.0 == -0.0, but their JSON differs: a memo of tool calls
    # must not answer one with the count of another.
    for order in (values, values[::-1]):
        for value in order:
            call = {"name": "f", "args": {"n": value, "m": [value]}, "id": "c1"}
            flat = {"name": "f", "args": {"n": value, "path": "a.py"}, "id": "c2"}
            for message in (AIMessage("", tool_calls=[call]), AIMessage("x", tool_calls=[flat])):
                assert estimate_tokens([message]) == _counted_from_parts(message)


def test_a_tool_call_edited_in_place_is_counted_again() -> None:
    message = AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "c1"}])
    before = estimate_tokens([message])
    message.tool_calls[0]["args"]["cmd"] = "ls -la " + "/usr/share/" * 40
    after = estimate_tokens([message])
    assert after == _counted_from_parts(message) and after > before
    message.tool_calls[0]["name"] = "a_much_longer_tool_name_than_bash"
    assert estimate_tokens([message]) == _counted_from_parts(message) > after
    message.tool_calls[0]["args"]["cmd"] = ["ls", "-la"]
    assert estimate_tokens([message]) == _counted_from_parts(message)


def test_a_text_counter_tokenizes_each_distinct_text_once() -> None:
    seen: list[str] = []

    def count_text(text: str) -> int:
        seen.append(text)
        return len(text)

    count = text_counter(count_text)
    history = [HumanMessage("abc"), AIMessage("abc"), HumanMessage("defg")]
    assert count(history) == 3 + 3 + 4 + 3 * 4
    assert count(history) == count([*history, HumanMessage("abc")]) - 3 - 4
    assert sorted(seen) == ["abc", "defg"]
