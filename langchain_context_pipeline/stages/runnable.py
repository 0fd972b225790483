"""The Runnable shell shared by the Pruner, the Condenser and the pipeline."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_context_pipeline.messages.coerce import coerce_messages


class MessagesRunnable(Runnable[Any, list[BaseMessage]]):
    """A Runnable from messages (or a PromptValue, dicts, tuples) to ``list[BaseMessage]``.

    Subclasses implement :meth:`_transform`, and :meth:`_atransform` when they
    await something; each call is traced under the instance's ``name``.
    """

    @property
    def InputType(self) -> Any:
        """The accepted input: a list of messages."""
        return list[BaseMessage]

    @property
    def OutputType(self) -> Any:
        """The output: a list of messages."""
        return list[BaseMessage]

    def _transform(self, messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        raise NotImplementedError

    async def _atransform(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> list[BaseMessage]:
        return self._transform(messages, config)

    def _run(
        self, value: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        return self._transform(coerce_messages(value), config)

    async def _arun(
        self, value: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        return await self._atransform(coerce_messages(value), config)

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Transform a list of messages (or a PromptValue) and return the new list."""
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Async :meth:`invoke`."""
        return await self._acall_with_config(self._arun, input, config, run_type="chain")
