from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_pipeline import estimate_tokens, resolve_token_counter, tiktoken_counter
from langchain_context_pipeline.tokens import IMAGE_TOKENS


def test_chars_over_four_plus_four_per_message() -> None:
    assert estimate_tokens([HumanMessage("x" * 10)]) == math.ceil(10 / 4) + 4
    assert estimate_tokens([HumanMessage("")]) == 4
    assert estimate_tokens([HumanMessage("abcd"), HumanMessage("abcde")]) == (1 + 4) + (2 + 4)


def test_empty_list_costs_nothing() -> None:
    assert estimate_tokens([]) == 0


def test_image_block_counts_1600() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 90_000}}
    message = HumanMessage([{"type": "text", "text": "look"}, image])
    assert estimate_tokens([message]) == 1 + 4 + IMAGE_TOKENS


def test_tool_calls_count_the_same_for_string_and_block_content() -> None:
    call = {"name": "write_file", "args": {"path": "a.py", "content": "y" * 4000}, "id": "c1"}
    as_string = AIMessage("", tool_calls=[call])
    as_blocks = AIMessage(
        [{"type": "tool_use", "id": "c1", "name": "write_file", "input": call["args"]}],
        tool_calls=[call],
    )
    assert estimate_tokens([as_string]) > 1000
    assert estimate_tokens([as_blocks]) == estimate_tokens([as_string])


def test_block_content_with_tool_calls_not_undercounted_like_langchain_core() -> None:
    call = {"name": "write_file", "args": {"content": "y" * 8000}, "id": "c1"}
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
