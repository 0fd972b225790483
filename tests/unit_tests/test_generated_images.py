"""A generated image (a Responses ``image_generation_call`` block) costs an image, not its base64.

langchain-openai keeps the image the model made as a content block of the AIMessage,
its base64 ``result`` included, and sends it back by its id alone (the whole item
only with ``store=False``). Counted as text, one image of a megabyte outweighed any
window: every request that held it was truncated to almost nothing.
"""

from __future__ import annotations

import base64
import random

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_openai.chat_models.base import _construct_responses_api_input

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.messages.kinds import IMAGE_TOKENS
from langchain_context_pipeline.tokens.counters import estimate_message_tokens


def generated(i: int, size: int = 300_000) -> AIMessage:
    data = base64.b64encode(random.Random(i).randbytes(size)).decode()
    block = {"type": "image_generation_call", "id": f"ig_{i}", "status": "completed"}
    block |= {"result": data, "revised_prompt": f"a cat, take {i}"}
    return AIMessage([block, {"type": "text", "text": f"Here is take {i}."}], id=f"a{i}")


def session(takes: int = 3) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Draw a cat.", id="t")]
    for i in range(takes):
        messages += [generated(i), HumanMessage(f"Make it bluer ({i}).", id=f"u{i}")]
    return messages


def test_a_generated_image_is_sent_by_its_id_and_counted_as_an_image() -> None:
    message = generated(0)
    sent = _construct_responses_api_input([message])
    assert sent[0] == {"type": "image_generation_call", "id": "ig_0"}  # no base64
    tokens = estimate_message_tokens(message)
    assert IMAGE_TOKENS <= tokens < IMAGE_TOKENS + 100


def test_a_history_of_generated_images_that_fits_is_left_as_it_is() -> None:
    messages = session()
    out = ContextPipeline(threshold=8_000).compress(messages)
    assert out.messages is messages
    assert out.report.stages == []


def test_over_the_budget_the_oldest_images_go_first_and_the_request_fits() -> None:
    messages = session(6)
    pipeline = ContextPipeline(threshold=6_000, tail_budget=2_000)
    out = pipeline.compress(messages)
    assert out.report.tokens_after <= 6_000
    kept = [m.id for m in out.messages]
    assert kept[0] == "t" and kept[-2:] == ["a5", "u5"]  # the task and the newest take
