"""OpenAI computer use: a ``computer_call`` block answered by a screenshot ``ToolMessage``.

langchain-openai keeps the call as a content block of the AIMessage (no
``tool_calls`` entry) and sends a ``ToolMessage`` with
``additional_kwargs["type"] == "computer_call_output"`` as its output, which must
hold the screenshot. The pair is one unit, and the screenshot is never briefed.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import DIGEST, ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.messages.blocks import call_index, pair_results
from tests.support.strategies_shapes import broken_pairs

SHOT = [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]


def computer_call(i: int, text: str = "") -> AIMessage:
    action = {"type": "type", "text": text} if text else {"type": "click", "x": 10, "y": i}
    block = {"type": "computer_call", "id": f"cu_{i}", "call_id": f"call_{i}", "action": action}
    return AIMessage([{"type": "reasoning", "id": f"rs_{i}", "summary": []}, block])


def screenshot(i: int) -> ToolMessage:
    kind = {"type": "computer_call_output"}
    return ToolMessage(list(SHOT), tool_call_id=f"call_{i}", additional_kwargs=kind)


def session(steps: int = 8) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("Book a flight.")]
    for i in range(steps):
        messages += [computer_call(i), screenshot(i), AIMessage("Clicked. " + "Page. " * 300)]
    return [*messages, HumanMessage("continue")]


def test_a_screenshot_answers_its_computer_call() -> None:
    messages = [computer_call(0), screenshot(0)]
    assert pair_results(messages) == {1: [0]}
    assert call_index(messages[0]) == {"call_0": ("computer", {"type": "click", "x": 10, "y": 0})}


@pytest.mark.parametrize("threshold", [1_500, 3_000, 6_000, 12_000])
@pytest.mark.parametrize("model", [None, DIGEST])
def test_compression_keeps_each_screenshot_with_its_call(threshold: int, model: object) -> None:
    messages = session()
    out = ContextPipeline(threshold=threshold, model=model).compress(messages).messages
    assert broken_pairs(out) == []
    assert estimate_tokens(out) <= threshold
    for message in out:
        if isinstance(message, ToolMessage):
            assert message.content == SHOT  # still a screenshot, never a text brief


def test_the_pruner_cuts_a_typed_action_but_not_the_screenshot() -> None:
    messages = [HumanMessage("task"), computer_call(0, "x" * 3_000), screenshot(0)]
    messages += [AIMessage("later " * 2_000), HumanMessage("go on")]
    out = Pruner(tail_budget=50).invoke(messages)
    assert out[2] is messages[2]
    typed = next(b for b in out[1].content if b["type"] == "computer_call")["action"]["text"]
    assert len(typed) < 300 and typed.startswith("x" * 100)
