"""Gemini's calls: ``tool_calls``, and a copy of the last one in ``additional_kwargs``.

langchain-google-genai sets ``additional_kwargs["function_call"]`` beside ``tool_calls``
(a copy of the response's last call); it sends ``tool_calls`` when there are any, and
so does langchain-openai. The copy is not a call of its own: it is neither counted,
nor paired (a legacy call no result answers), nor cut.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

from langchain_context_pipeline import ContextPipeline, Pruner
from langchain_context_pipeline.messages.blocks import call_index
from langchain_context_pipeline.tokens.counters import estimate_message_tokens

genai = pytest.importorskip("langchain_google_genai.chat_models")
types = pytest.importorskip("google.genai.types")


def gemini_reply(i: int, calls: int = 2) -> AIMessage:
    """An AIMessage as langchain-google-genai parses a response of ``calls`` calls."""
    parts = [
        types.Part(
            function_call=types.FunctionCall(
                name="read_file", args={"path": f"src/mod_{i}_{k}.py", "why": "x" * 600}
            )
        )
        for k in range(calls)
    ]
    candidate = types.Candidate(content=types.Content(role="model", parts=parts))
    message: AIMessage = genai._parse_response_candidate(candidate)
    message.id = f"a{i}"
    return message


def session(steps: int = 6) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="t")]
    for i in range(steps):
        reply = gemini_reply(i)
        messages.append(reply)
        for call in reply.tool_calls:
            text = f"def f_{i}():\n    return {i}\n" * 80
            messages.append(ToolMessage(text, tool_call_id=call["id"], name=call["name"]))
    return [*messages, HumanMessage("go on", id="last")]


def without_copy(message: AIMessage) -> AIMessage:
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != "function_call"}
    return message.model_copy(update={"additional_kwargs": kwargs})


def test_the_copy_is_what_the_adapters_do_not_send() -> None:
    reply = gemini_reply(0)
    assert "function_call" in reply.additional_kwargs and len(reply.tool_calls) == 2
    _, contents = genai._parse_chat_history([HumanMessage("t"), reply])
    sent = [p.function_call.name for p in contents[-1].parts if p.function_call]
    assert sent == ["read_file", "read_file"]  # the two listed calls, no third
    assert "function_call" not in _convert_message_to_dict(reply)


def test_the_copy_is_neither_a_call_nor_counted() -> None:
    reply = gemini_reply(0)
    assert set(call_index(reply)) == {c["id"] for c in reply.tool_calls}
    assert estimate_message_tokens(reply) == estimate_message_tokens(without_copy(reply))


def _answered(messages: list[BaseMessage]) -> list[str]:
    """Results with no listed call before them, and listed calls never answered."""
    open_calls: set[str] = set()
    problems: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(f"result {message.tool_call_id} has no call")
            open_calls.discard(message.tool_call_id)
        elif isinstance(message, AIMessage):
            open_calls |= {c["id"] for c in message.tool_calls if c["id"]}
    return problems + [f"call {cid} unanswered" for cid in open_calls]


@pytest.mark.parametrize("threshold", [1_500, 4_000, 9_000])
def test_a_gemini_history_is_pruned_and_cut_by_its_listed_calls(threshold: int) -> None:
    messages = session()
    out = ContextPipeline(threshold=threshold, tail_budget=threshold // 3).invoke(messages)
    assert _answered(out) == []
    pruned: Any = Pruner(tail_budget=50).invoke(messages)[1]
    assert all(len(c["args"]["why"]) <= 200 for c in pruned.tool_calls)
    # The copy, never sent, is left as it was.
    assert (
        pruned.additional_kwargs["function_call"] == messages[1].additional_kwargs["function_call"]
    )
