"""Deterministic stand-ins for the remote summarizer model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class EchoSummarizer(BaseChatModel):
    """Replies with a fixed share of its prompt's last message; sync and async differ.

    The sync path answers ``"sync: ..."`` and the async path ``"async: ..."``, so a
    test can tell which path ran. Every call is recorded.
    """

    share: float = 0.05
    cap_chars: int = 4000
    max_tokens: int | None = None
    calls: list[dict[str, Any]] = []  # noqa: RUF012 - pydantic copies the default

    @property
    def _llm_type(self) -> str:
        return "echo-summarizer"

    def _reply(self, messages: Sequence[BaseMessage], prefix: str, kwargs: dict[str, Any]) -> str:
        self.calls.append({"messages": list(messages), "kwargs": dict(kwargs), "path": prefix})
        prompt = str(messages[-1].content)
        size = min(int(len(prompt) * self.share), self.cap_chars)
        return f"{prefix}: " + prompt[:size]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self._reply(messages, "sync", kwargs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self._reply(messages, "async", kwargs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class FailingModel(BaseChatModel):
    """A summarizer that raises on every call."""

    error: str = "rate limited: 429 Too Many Requests"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "failing"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        raise RuntimeError(self.error)
