"""LangChain v1 entry point: an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

    >>> from langchain_context_pipeline.middleware import ContextPipelineMiddleware
    >>> from langchain_context_pipeline import DIGEST
    >>> middleware = ContextPipelineMiddleware(threshold=16000, model=DIGEST)
    >>> middleware.name
    'ContextPipelineMiddleware'

Before each model call, ``wrap_model_call`` / ``awrap_model_call`` compress the
request's messages so that the system message, the tools' schemas and the messages
together stay within ``threshold`` tokens, by the pipeline's own counter. Only the
request is edited (``request.override(messages=...)``): the agent's ``messages``
state keeps the full history. The one state write is the carried summary, in a
private key (the same key the LangGraph hook uses), so the next call reuses it
instead of summarizing again.

This is the only module of the package that imports ``langchain.agents``; like the
LangGraph hook, it is an entry point and may import ``langgraph``. It needs the
``agents`` extra: ``pip install 'langchain-context-pipeline[agents]'``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from typing_extensions import NotRequired

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        PrivateStateAttr,
    )
    from langgraph.types import Command
except ImportError as exc:
    raise ImportError(
        "ContextPipelineMiddleware needs LangChain v1 agents (langchain>=1): "
        "pip install 'langchain-context-pipeline[agents]'"
    ) from exc

from langchain_context_pipeline._cache_hint import hint_request
from langchain_context_pipeline._events import acompress_traced, compress_traced
from langchain_context_pipeline._stream import emit
from langchain_context_pipeline.carried import SUMMARY_STATE_KEY, CarriedSummary
from langchain_context_pipeline.pipeline import ContextPipeline
from langchain_context_pipeline.recall import create_recall_tool
from langchain_context_pipeline.report import CompressionResult
from langchain_context_pipeline.settings import PipelineSettings
from langchain_context_pipeline.threshold import Threshold, check_threshold, resolve_threshold
from langchain_context_pipeline.tokens import TokenCounter

__all__ = ["SUMMARY_STATE_KEY", "ContextPipelineAgentState", "ContextPipelineMiddleware"]

_TOOL_COUNTS_KEPT = 16


class ContextPipelineAgentState(AgentState[Any]):
    """The agent state plus the middleware's private carried summary."""

    context_pipeline_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    """The summary carried between model calls; not part of the agent's input or output."""


def _tool_schema(tool: Any) -> Any:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        return convert_to_openai_tool(tool)
    except Exception:  # provider built-ins and odd dicts: count what is there
        if isinstance(tool, Mapping):
            return dict(tool)
        return {"name": getattr(tool, "name", repr(tool)), "description": str(tool)}


class ContextPipelineMiddleware(AgentMiddleware[ContextPipelineAgentState, Any, Any]):
    """Keep every model call of a ``create_agent`` agent under a token budget.

    Example:
        .. code-block:: python

            from langchain.agents import create_agent

            agent = create_agent(
                model,
                tools,
                middleware=[ContextPipelineMiddleware(threshold=("fraction", 0.8), model=model)],
            )
    """

    state_schema = ContextPipelineAgentState

    def __init__(
        self,
        settings: PipelineSettings | None = None,
        *,
        threshold: Threshold = 32000,
        model: Any = None,
        token_counter: Any = None,
        recall_tool: bool = True,
        cache_control: bool = False,
        **keywords: Any,
    ) -> None:
        """Configure the middleware.

        Args:
            settings: :class:`PipelineSettings` for the pipeline (its threshold is
                replaced by ``threshold``).
            threshold: the budget of each model call in tokens (system message, tool
                schemas and messages together), or ``("fraction", share)`` of the
                agent model's ``profile["max_input_tokens"]``, read from each request.
            model: the summarizer (a chat model, Runnable, callable or
                ``"provider:model"`` name), :data:`DIGEST` for the deterministic
                digest, or ``None`` to prune and truncate only.
            token_counter: the token counter (see :class:`ContextPipeline`).
            recall_tool: add the ``recall`` tool to the agent, so it can read back
                what compaction replaced (see :mod:`langchain_context_pipeline.recall`).
            cache_control: mark the end of the request's stable prefix for Anthropic's
                prompt cache (see :mod:`langchain_context_pipeline._cache_hint`). With
                ``AnthropicPromptCachingMiddleware``, list that one first (outer), so
                this one counts its breakpoints and stays within Anthropic's 4.
            **keywords: any other :class:`ContextPipeline` setting by name
                (``tail_budget``, ``head_count``, ``tool_output_limit``, ...).

        Raises:
            ValueError: for a malformed threshold or inconsistent pipeline settings.
            TypeError: for an unknown setting.
        """
        super().__init__()
        check_threshold(threshold)
        self.threshold: Threshold = threshold
        if isinstance(threshold, int):
            keywords["threshold"] = threshold
        # One pipeline (one circuit breaker); a fraction threshold is resolved per
        # call and passed to ``compress``, which derives the tail from it.
        self.pipeline = ContextPipeline(
            settings, model=model, token_counter=token_counter, **keywords
        )
        self.token_counter: TokenCounter = self.pipeline.token_counter
        self._tool_tokens: OrderedDict[tuple[int, ...], tuple[Sequence[Any], int]] = OrderedDict()
        # The agent's full history stays in state: recall reads the originals there.
        self.tools = [create_recall_tool()] if recall_tool else []
        self.cache_control = cache_control

    # -- budget ------------------------------------------------------------------------

    def _tools_tokens(self, tools: Sequence[Any]) -> int:
        if not tools:
            return 0
        key = tuple(id(t) for t in tools)
        hit = self._tool_tokens.get(key)
        if hit is not None:
            return hit[1]
        schemas = [_tool_schema(t) for t in tools]
        text = json.dumps(schemas, ensure_ascii=False, sort_keys=True, default=str)
        tokens = int(self.token_counter([SystemMessage(text)]))
        # The tools are kept alive with their count, so their ids cannot be reused.
        self._tool_tokens[key] = (tuple(tools), tokens)
        if len(self._tool_tokens) > _TOOL_COUNTS_KEPT:
            self._tool_tokens.popitem(last=False)
        return tokens

    def _budget(self, request: ModelRequest[Any]) -> tuple[int, int]:
        """Return this request's threshold and the tokens its other parts take."""
        total = resolve_threshold(self.threshold, request.model)
        reserved = self._tools_tokens(request.tools)
        if request.system_message is not None:
            reserved += int(self.token_counter([request.system_message]))
        return total, reserved

    # -- request and state -------------------------------------------------------------

    @staticmethod
    def _carried(request: ModelRequest[Any]) -> tuple[Any, CarriedSummary | None]:
        state = request.state
        stored = state.get(SUMMARY_STATE_KEY) if isinstance(state, Mapping) else None
        return stored, CarriedSummary.from_state(stored, SUMMARY_STATE_KEY)

    def _request(
        self, request: ModelRequest[Any], messages: list[BaseMessage], result: CompressionResult
    ) -> ModelRequest[Any]:
        if result.messages is not messages:
            request = request.override(messages=cast(list[AnyMessage], list(result.messages)))
        if self.cache_control:
            request = hint_request(request, result.report.stable_prefix)
        return request

    @staticmethod
    def _response(
        response: ModelResponse[Any], stored: Any, result: CompressionResult
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        carried = None if result.carried_summary is None else result.carried_summary.to_dict()
        if carried == (stored if isinstance(stored, Mapping) else None):
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={SUMMARY_STATE_KEY: carried})
        )

    # -- AgentMiddleware ---------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Compress the request's messages, call the model, keep the carried summary."""
        threshold, reserved = self._budget(request)
        stored, carried = self._carried(request)
        messages: list[BaseMessage] = list(request.messages)
        result = compress_traced(
            self.pipeline,
            messages,
            carried_summary=carried,
            reserved_tokens=reserved,
            threshold=threshold,
        )
        emit(result.report)
        response = handler(self._request(request, messages, result))
        return self._response(response, stored, result)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`: the summarizer is awaited."""
        threshold, reserved = self._budget(request)
        stored, carried = self._carried(request)
        messages: list[BaseMessage] = list(request.messages)
        result = await acompress_traced(
            self.pipeline,
            messages,
            carried_summary=carried,
            reserved_tokens=reserved,
            threshold=threshold,
        )
        emit(result.report)
        response = await handler(self._request(request, messages, result))
        return self._response(response, stored, result)
