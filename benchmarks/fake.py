"""The one deterministic fake summarizer that serves every strategy.

Its reply is the first ``min(share x prompt chars, cap_chars)`` characters of its
prompt (the prompt's messages rendered as text and joined), so its size follows
its input the way a real summary's would, and it costs no network and no time.
It records each call: input and output tokens by the benchmark's counters, and
the wall time spent inside it (subtracted from the strategies' overhead).

It is one of the test suite's scripted models (:class:`tests.support.fakes.ReplyingChatModel`,
the sync and async paths written once) and sizes its reply as the tests'
``EchoSummarizer`` does (:func:`tests.support.fakes.prompt_head`); the benchmark
imports the tests' helpers, never the other way round.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from pydantic import PrivateAttr

from langchain_context_pipeline import estimate_tokens
from langchain_context_pipeline.tokens.counters import message_text
from tests.support.fakes import Call, ReplyingChatModel, prompt_head

SHARE = 0.2
"""The reply's size as a share of the prompt's characters."""

CAP_CHARS = 16_000
"""The longest reply, in characters."""


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """Render the prompt as one text: each message's text, then its tool calls."""
    parts: list[str] = []
    for message in messages:
        text = message_text(message)
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [
                f"{c['name']}({json.dumps(c['args'], ensure_ascii=False, sort_keys=True)})"
                for c in message.tool_calls
            ]
            text = "\n".join([text, *calls]) if text else "\n".join(calls)
        parts.append(text)
    return "\n\n".join(parts)


@dataclass
class SummaryCall:
    """One call to the fake summarizer."""

    input_tokens: int
    output_tokens: int
    input_tokens_tiktoken: int | None
    output_tokens_tiktoken: int | None
    input_chars: int
    output_chars: int


class FakeSummarizer(ReplyingChatModel):
    """A chat model whose reply is the head of its own prompt (20%, at most 16,000 chars)."""

    llm_type = "benchmark-fake-summarizer"
    share: float = SHARE
    cap_chars: int = CAP_CHARS

    _calls: list[SummaryCall] = PrivateAttr(default_factory=list)
    _elapsed_ns: int = PrivateAttr(default=0)
    _second_counter: Callable[[Sequence[BaseMessage]], int] | None = PrivateAttr(default=None)

    def set_second_counter(self, counter: Callable[[Sequence[BaseMessage]], int] | None) -> None:
        """Also count each call's tokens with ``counter`` (e.g. tiktoken)."""
        self._second_counter = counter

    def reset(self) -> None:
        """Forget the recorded calls and time."""
        self._calls = []
        self._elapsed_ns = 0

    @property
    def calls(self) -> list[SummaryCall]:
        """The calls recorded since the last reset."""
        return self._calls

    @property
    def elapsed_ns(self) -> int:
        """Nanoseconds spent inside ``invoke``/``ainvoke`` since the last reset."""
        return self._elapsed_ns

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        text = prompt_text(messages)
        head = prompt_head(text, self.share, self.cap_chars)
        reply = AIMessage(content=head)
        second = self._second_counter
        self._calls.append(
            SummaryCall(
                input_tokens=estimate_tokens(messages),
                output_tokens=estimate_tokens([reply]),
                input_tokens_tiktoken=None if second is None else second(messages),
                output_tokens_tiktoken=None if second is None else second([reply]),
                input_chars=len(text),
                output_chars=len(head),
            )
        )
        return reply

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            self._elapsed_ns += time.perf_counter_ns() - start

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            self._elapsed_ns += time.perf_counter_ns() - start
