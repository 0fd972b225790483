"""The window with reported usage: counted spans, standing cuts, what a request fills.

A provider's reported ``input_tokens`` for a request that repeats the previous one
and adds messages tells exactly what the added messages cost; found again later,
wherever they stand, they are budgeted at that count instead of the conservative
estimate. With the cuts of the last request carried, a budget that grows with what
the provider counted never moves the cuts already made (and the cached prefix).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import estimate_tokens
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens.calibration import (
    CALIBRATION_STATE_KEY,
    MAX_SPANS,
    Calibration,
)
from langchain_context_pipeline.tokens.counted import SPAN_MARGIN
from langchain_context_pipeline.tokens.counters import estimate_message_tokens
from langchain_context_pipeline.tokens.prefix import request_digests, request_seed

SEED = request_seed("You are an agent.")


def step(i: int, size: int = 400) -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": f"src/mod{i}.py"}, "id": f"c{i}"}
    return [
        AIMessage(f"Reading module {i}.", tool_calls=[call], id=f"a{i}"),
        ToolMessage(f"def f{i}():\n    return {i}\n" * size, tool_call_id=f"c{i}", id=f"t{i}"),
    ]


def send(cal: Calibration, messages: list[BaseMessage], reported: int) -> Calibration:
    """Record a request of ``messages`` (its estimate sent) and the provider's count of it."""
    digests, own = request_digests(SEED, messages)
    cal = cal.sending(estimate_tokens(messages), messages[-1].id, digests, 0, None, own)
    reply = AIMessage("ok", response_metadata={"model_name": "m"})
    reply.usage_metadata = {"input_tokens": reported, "output_tokens": 1, "total_tokens": reported}
    return cal.observe(reply)[0].after_reply()


def test_the_messages_a_request_adds_are_counted_at_the_reported_difference() -> None:
    task: list[BaseMessage] = [HumanMessage("Fix the bug", id="task")]
    first = [*task, *step(0)]
    second = [*first, *step(1)]
    reported_first = estimate_tokens(first) * 6 // 10
    added = estimate_tokens(second) - estimate_tokens(first)
    cal = send(Calibration(), first, reported_first)
    assert cal.spans == ()  # nothing counted before it: no difference to take
    cal = send(cal, second, reported_first + added // 2)
    (span,) = cal.spans
    assert span[2] == 2  # the two messages step 1 added
    assert span[3] == added
    assert span[4] == added // 2

    # A compaction dropped step 0: the request repeats no counted prefix, but step
    # 1's messages stand unchanged, so they are budgeted at the provider's count.
    threshold = 3 * added
    compacted = [*task, HumanMessage("[2 messages removed]", id="note"), *step(1)]
    digests, own = request_digests(SEED, compacted)
    assert cal.fitting_budget(threshold, digests) == cal.budget(threshold)
    credited = cal.fitting_budget(threshold, digests, own)
    assert credited == span[3] + (threshold - math.ceil(span[4] * SPAN_MARGIN) - span[2])

    # One of them changed (pruned, edited): nothing of the span is credited.
    changed = [*compacted[:-1], ToolMessage("[read_file] src/mod1.py", tool_call_id="c1", id="t1")]
    digests, own = request_digests(SEED, changed)
    assert cal.fitting_budget(threshold, digests, own) == cal.budget(threshold)


def test_spans_survive_the_state_and_malformed_ones_are_dropped() -> None:
    spans = tuple(("f", f"d{i}", 2, 100 + i, 60 + i) for i in range(MAX_SPANS + 5))
    cal = Calibration(correction=0.7, samples=3, spans=spans, cuts=("a3", None, 120))
    back = Calibration.from_state(cal.to_dict())
    assert back.spans == spans[-MAX_SPANS:] and back.cuts == ("a3", None, 120)
    bad = cal.to_dict()
    bad["spans"] = [["f", "d", 0, 1, 1], ["f", "d", 2, -1, 1], "x", ["f", "d", 2, 10, 6]]
    bad["cuts"] = ["a3"]
    read = Calibration.from_state(bad)
    assert read.spans == (("f", "d", 2, 10, 6),) and read.cuts is None


# -- through the middleware, over a whole run --------------------------------------------

THRESHOLD = 6000


def provider_count(messages: list[BaseMessage]) -> int:
    """A provider stub's count: 60% of the conservative estimate, message by message."""
    return 3 + sum(int(estimate_message_tokens(m) * 0.6) for m in messages)


class Turn(NamedTuple):
    sent: list[BaseMessage]
    """What the model was sent (system message first)."""
    reported: int
    """The stub provider's count of it."""
    added: list[BaseMessage]
    """The messages the history gained since the previous call."""


def run(sizes: list[int], threshold: int = THRESHOLD) -> list[Turn]:
    """Drive the middleware over a growing history, one tool step a call."""
    mw = ContextPipelineMiddleware(threshold=threshold, tail_budget=threshold // 4)
    history: list[BaseMessage] = [HumanMessage("Fix the failing test", id="task")]
    state: dict[str, Any] = {}
    turns: list[Turn] = []
    for i, size in enumerate(sizes):
        added = step(i, size)
        history = [*history, *added]

        def handler(
            request: ModelRequest[Any], added: list[BaseMessage] = added
        ) -> ModelResponse[Any]:
            sent = [SystemMessage("You are an agent."), *request.messages]
            tokens = provider_count(sent)
            turns.append(Turn(sent, tokens, added))
            reply = AIMessage("", response_metadata={"model_name": "m"})
            reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": 1}
            return ModelResponse(result=[reply])

        request = ModelRequest(
            model=GenericFakeChatModel(messages=iter([])),
            messages=list(history),
            system_message=SystemMessage("You are an agent."),
            tool_choice=None,
            tools=[],
            response_format=None,
            state={"messages": list(history), **state},  # type: ignore[typeddict-item]
        )
        response = mw.wrap_model_call(request, handler)
        if isinstance(response, ExtendedModelResponse) and response.command is not None:
            state.update(response.command.update)  # type: ignore[arg-type]
    assert CALIBRATION_STATE_KEY in state
    return turns


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(5, 150), min_size=20, max_size=45))
def test_with_reported_usage_the_window_is_used_and_never_passed(sizes: list[int]) -> None:
    turns = run(sizes)
    for n, turn in enumerate(turns, start=1):
        assert turn.reported <= THRESHOLD, f"call {n}: {turn.reported} reported > {THRESHOLD}"
        if n < 3:
            continue  # the first calls learn the provider's count
        before = turns[n - 2]
        if turn.sent[: len(before.sent)] == before.sent:
            continue
        # A compaction: only when the provider's count of the request it would have
        # repeated, plus the estimate of what is new, is over the threshold (not
        # when the conservative estimate of it all is).
        new = sum(estimate_message_tokens(m) for m in turn.added)
        assert before.reported + new > THRESHOLD, f"call {n} compacted a request that fit"
