"""Deterministic stand-ins for chat models: the summarizer and the agent's model.

:class:`ReplyingChatModel` is the base of the test suite's scripted chat models:
a subclass writes one ``_reply`` (and, for an async-only model, ``_areply``) and
gets the sync and async generate paths and ``bind_tools`` from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool


@dataclass(frozen=True)
class Call:
    """What one model call carried besides its messages."""

    kwargs: dict[str, Any]
    """The call's keyword arguments: the bound ones (``tools``, ``max_tokens``...) too."""
    path: Literal["sync", "async"]
    """Which path the call came through: ``_generate`` or ``_agenerate``."""
    tags: list[str]
    """The run's tags (the pipeline's summarizer calls carry ``nostream``)."""


def prompt_head(text: str, share: float, cap_chars: int) -> str:
    """The first ``min(share x len(text), cap_chars)`` characters of ``text``.

    A fake summary whose size follows its prompt, as a real one's would; the
    tests' :class:`EchoSummarizer` and the benchmark's ``FakeSummarizer`` reply so.
    """
    return text[: min(int(len(text) * share), cap_chars)]


def _result(reply: AIMessage | str) -> ChatResult:
    message = AIMessage(reply) if isinstance(reply, str) else reply
    return ChatResult(generations=[ChatGeneration(message=message)])


class ReplyingChatModel(BaseChatModel):
    """A chat model whose every reply comes from ``_reply`` (sync) or ``_areply`` (async).

    A subclass sets ``llm_type`` and implements ``_reply(messages, call)``, returning
    the reply message or its text; ``_areply`` calls ``_reply`` unless overridden (an
    async-only model overrides it and leaves ``_reply`` raising). ``bind_tools`` binds
    the tools' OpenAI schemas, so a reply can read them in ``call.kwargs["tools"]``.
    """

    llm_type: ClassVar[str] = "replying"

    @property
    def _llm_type(self) -> str:
        return self.llm_type

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage | str:
        raise NotImplementedError(f"{type(self).__name__} has no sync reply")

    async def _areply(self, messages: list[BaseMessage], call: Call) -> AIMessage | str:
        return self._reply(messages, call)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tags = list(run_manager.tags) if run_manager is not None else []
        return _result(self._reply(messages, Call(kwargs, "sync", tags)))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tags = list(run_manager.tags) if run_manager is not None else []
        return _result(await self._areply(messages, Call(kwargs, "async", tags)))


class EchoSummarizer(ReplyingChatModel):
    """Replies with a fixed share of its prompt's last message; sync and async differ.

    The sync path answers ``"sync: ..."`` and the async path ``"async: ..."``, so a
    test can tell which path ran. Every call is recorded.
    """

    llm_type = "echo-summarizer"
    share: float = 0.05
    cap_chars: int = 4000
    max_tokens: int | None = None
    calls: list[dict[str, Any]] = []  # noqa: RUF012 - pydantic copies the default

    def _reply(self, messages: list[BaseMessage], call: Call) -> str:
        self.calls.append(
            {"messages": list(messages), "kwargs": dict(call.kwargs), "path": call.path}
        )
        return f"{call.path}: " + prompt_head(str(messages[-1].content), self.share, self.cap_chars)


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
