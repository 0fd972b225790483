"""Calibration from the provider's reported usage, and the retry on a context-length error."""
# ruff: noqa: RUF001

from __future__ import annotations

from typing import Any

import pytest
import quicktok
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline._overflow import overflow_of
from langchain_context_pipeline.calibration import CALIBRATION_STATE_KEY, Calibration
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens import MESSAGE_OVERHEAD_TOKENS, countable_parts

CL100K = quicktok.get_encoding("cl100k_base")
WINDOW = 16_000
SYSTEM = "你是一个谨慎的编程助手，请用中文回答。" * 20


def true_tokens(messages: list[BaseMessage]) -> int:
    total = 3
    for message in messages:
        texts, fixed = countable_parts(message)
        total += sum(len(CL100K.encode_ordinary(t)) for t in texts) + fixed
        total += MESSAGE_OVERHEAD_TOKENS
    return total


def chinese_step(i: int) -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": f"docs/第{i}章.md"}, "id": f"c{i}"}
    text = f"第{i}章：上下文管道在每次调用模型之前压缩对话，保留任务和最近的消息。" * 25
    return [
        AIMessage(f"我来读第{i}章。", tool_calls=[call], id=f"a{i}"),
        ToolMessage(text, tool_call_id=f"c{i}", id=f"t{i}"),
    ]


class UsageHandler:
    """A model call that reports true cl100k input tokens, as a provider does."""

    def __init__(self, usage: Any = "true", fail: int = 0, fail_after: int = 0) -> None:
        self.usage = usage
        self.fail = fail
        self.fail_after = fail_after
        self.requests: list[ModelRequest[Any]] = []
        self.errors: list[Exception] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        sent = [request.system_message, *request.messages] if request.system_message else []
        tokens = true_tokens(sent)
        if self.fail and len(request.messages) > self.fail_after:
            self.fail -= 1
            error = RuntimeError(
                "Error code: 400 - {'error': {'code': 'context_length_exceeded', 'message': "
                f"\"This model's maximum context length is {WINDOW // 2} tokens. However, your "
                f'messages resulted in {tokens} tokens."}}}}'
            )
            self.errors.append(error)
            raise error
        reply = AIMessage("好的", response_metadata={"model_name": "fake"})
        if self.usage == "true":
            reply.usage_metadata = {
                "input_tokens": tokens,
                "output_tokens": 2,
                "total_tokens": tokens + 2,
            }
        elif self.usage is not None:
            reply.usage_metadata = {
                "input_tokens": self.usage,
                "output_tokens": 2,
                "total_tokens": 2,
            }
        return ModelResponse(result=[reply])


def request(messages: list[BaseMessage], state: dict[str, Any]) -> ModelRequest[Any]:
    return ModelRequest(
        model=GenericFakeChatModel(messages=iter([])),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(SYSTEM),
        tool_choice=None,
        tools=[],
        response_format=None,
        state={"messages": messages, **state},  # type: ignore[typeddict-item]
    )


def run_agent(steps: int, handler: UsageHandler) -> tuple[list[float], dict[str, Any]]:
    mw = ContextPipelineMiddleware(threshold=WINDOW, tail_budget=4000)
    messages: list[BaseMessage] = [HumanMessage("请阅读文档并总结。", id="task")]
    state: dict[str, Any] = {}
    corrections = []
    for i in range(steps):
        out = mw.wrap_model_call(request(messages, state), handler)
        if isinstance(out, ExtendedModelResponse):
            assert out.command is not None
            state.update(out.command.update)  # type: ignore[arg-type]
        corrections.append(Calibration.from_state(state.get(CALIBRATION_STATE_KEY)).correction)
        messages = [*messages, *chinese_step(i)]
    return corrections, state


def test_sixty_steps_in_chinese_stay_within_the_window_by_the_true_count() -> None:
    handler = UsageHandler()
    corrections, _ = run_agent(60, handler)
    for n, sent in enumerate(handler.requests[1:], start=2):
        real = true_tokens([sent.system_message, *sent.messages])  # type: ignore[list-item]
        assert real <= WINDOW, f"call {n}: {real} > {WINDOW}"
    # After one reply the correction is the true ratio (within 5%), and it stays put.
    first = handler.requests[0]
    ratio = true_tokens([first.system_message, *first.messages]) / (  # type: ignore[list-item]
        ContextPipelineMiddleware(threshold=WINDOW).token_counter(
            [first.system_message, *first.messages]  # type: ignore[list-item]
        )
    )
    assert corrections[0] == pytest.approx(ratio, rel=0.05)
    assert corrections[0] != 1.0


@pytest.mark.parametrize("usage", [None, 0, -5, 1_000_000_000])
def test_missing_or_absurd_usage_changes_nothing_and_warns_once(
    usage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    corrections, state = run_agent(4, UsageHandler(usage=usage))
    assert corrections == [1.0] * 4
    assert CALIBRATION_STATE_KEY not in state
    assert caplog.text.count("token calibration") == 1


def test_usage_from_another_model_is_ignored() -> None:
    calibration = Calibration().sending(1000)
    reply = AIMessage(
        "x", response_metadata={"model_name": "claude-3-5", "model_provider": "anthropic"}
    )
    reply.usage_metadata = {"input_tokens": 1500, "output_tokens": 1, "total_tokens": 1501}
    same, reason = calibration.observe(reply, ("openai", "gpt-4o"))
    assert same == calibration and reason is not None and reason.startswith("other model")
    moved, reason = calibration.observe(reply, ("anthropic", "claude-3-5"))
    assert reason is None and moved.correction == pytest.approx(1.5 * 1.03)


def test_a_context_length_error_is_retried_once_within_a_smaller_budget() -> None:
    handler = UsageHandler(fail=1, fail_after=10)
    run_agent(12, handler)
    assert len(handler.errors) == 1 and len(handler.requests) == 13
    failed = next(i for i, r in enumerate(handler.requests) if len(r.messages) > 10)
    first, retry = handler.requests[failed], handler.requests[failed + 1]
    assert first.messages == retry.messages or true_tokens(list(retry.messages)) < true_tokens(
        list(first.messages)
    )
    assert true_tokens(list(retry.messages)) <= WINDOW // 2  # the window the error reported


def test_a_second_context_length_error_reaches_the_caller_unchanged() -> None:
    handler = UsageHandler(fail=2)
    with pytest.raises(RuntimeError) as raised:
        run_agent(1, handler)
    assert raised.value is handler.errors[1]


def test_overflow_errors_are_recognised_and_read() -> None:
    openai = overflow_of(
        RuntimeError(
            "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens"
        )
    )
    assert openai is not None and (openai.window, openai.requested) == (8192, 9000)
    anthropic = overflow_of(RuntimeError("prompt is too long: 208000 tokens > 200000 maximum"))
    assert anthropic is not None and (anthropic.window, anthropic.requested) == (200000, 208000)
    assert overflow_of(RuntimeError("rate limited")) is None
    from langchain_core.exceptions import ContextOverflowError

    bare = overflow_of(ContextOverflowError("too big"))
    assert bare is not None and bare.window is None
