"""LangChain v1 entry point: an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

    >>> from langchain_context_pipeline.integrations.middleware import ContextPipelineMiddleware
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

When the budget cannot be met (the system message and the tools' schemas, or the
system messages among the messages, exceed ``threshold`` by themselves), the agent
does not stop: a warning names the sizes, and the model gets the smallest valid
request, the system messages and the newest turn cut to its minimum (tool calls
with their results), over the budget by ``report.over_budget`` tokens.

This is the only module of the package that imports ``langchain.agents``; like the
LangGraph hook, it is an entry point and may import ``langgraph``. It needs the
``agents`` extra: ``pip install 'langchain-context-pipeline[agents]'``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from functools import partial
from typing import Annotated, Any, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
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

from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.integrations.recall import create_recall_tool
from langchain_context_pipeline.integrations.stream import emit
from langchain_context_pipeline.integrations.tool_fingerprint import tools_fingerprint
from langchain_context_pipeline.integrations.turn import (
    Budget,
    Compress,
    Turn,
    TurnInput,
    WarnOnce,
    adrive,
    carry_over,
    compress_args,
    drive,
    observe,
    read_turn,
    refit,
    sending,
    summary_update,
)
from langchain_context_pipeline.messages.cache_hint import hint_request
from langchain_context_pipeline.messages.snapshot import Transient
from langchain_context_pipeline.stages.carried import SUMMARY_STATE_KEY
from langchain_context_pipeline.stages.settings import PipelineSettings, settings_or_model
from langchain_context_pipeline.tokens.calibration import (
    CALIBRATION_STATE_KEY,
    FIT_ATTEMPTS,
    Calibration,
    model_identity,
    request_seed,
    tools_tokens,
)
from langchain_context_pipeline.tokens.counters import (
    TokenCounter,
    counting_model,
    reset_counting_model,
)
from langchain_context_pipeline.tokens.overflow import overflow_of
from langchain_context_pipeline.tokens.threshold import (
    Threshold,
    normalize_threshold,
    resolve_threshold,
    window_warning,
)

__all__ = ["SUMMARY_STATE_KEY", "ContextPipelineAgentState", "ContextPipelineMiddleware"]

_TOOL_COUNTS_KEPT = 16

logger = logging.getLogger("langchain_context_pipeline")


class ContextPipelineAgentState(AgentState[Any]):
    """The agent state plus the middleware's private carried summary."""

    context_pipeline_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    """The summary carried between model calls; not part of the agent's input or output."""
    context_pipeline_calibration: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    """The per-thread correction from the provider's reported usage (``Calibration``)."""


class ContextPipelineMiddleware(Transient, AgentMiddleware[ContextPipelineAgentState, Any, Any]):
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
        settings: PipelineSettings | Any = None,
        *,
        threshold: Threshold | None = None,
        model: Any = None,
        token_counter: Any = None,
        recall_tool: bool = True,
        cache_control: bool = False,
        **keywords: Any,
    ) -> None:
        """Configure the middleware.

        Args:
            settings: :class:`PipelineSettings` for the pipeline; or the summarizer,
                as ``SummarizationMiddleware(model)`` takes it:
                ``ContextPipelineMiddleware(model)`` is ``model=model``.
            threshold: the budget of each model call in tokens (system message, tool
                schemas and messages together): an int or ``("tokens", n)``; or
                ``("fraction", share)`` of the agent model's
                ``profile["max_input_tokens"]``, read from each request. Left out,
                ``settings.threshold`` (32000 by default). A token count above the
                model's ``max_input_tokens`` is warned about once.
            model: the summarizer (a chat model, Runnable, callable or
                ``"provider:model"`` name), :data:`DIGEST` for the deterministic
                digest, or ``None`` to prune and truncate only.
            token_counter: the token counter (see :class:`ContextPipeline`);
                ``"model"`` counts with each request's model
                (``get_num_tokens_from_messages``); ``"exact"`` with its tokenizer
                when one is available offline (else the default estimate, with a
                warning).
            recall_tool: add the ``recall`` tool to the agent, so it can read back
                what compaction replaced (see :mod:`langchain_context_pipeline.recall`).
            cache_control: mark the end of the request's stable prefix for Anthropic's
                prompt cache (see
                :mod:`langchain_context_pipeline.messages.cache_hint`). With
                ``AnthropicPromptCachingMiddleware``, list that one first (outer), so
                this one counts its breakpoints and stays within Anthropic's 4.
            **keywords: any other :class:`ContextPipeline` setting by name
                (``tail_budget``, ``head_count``, ``tool_output_limit``, ...).

        Raises:
            ValueError: for a malformed threshold or inconsistent pipeline settings.
            TypeError: for an unknown setting, or a summarizer given twice.
        """
        super().__init__()
        settings, model = settings_or_model(settings, model)
        if threshold is None:
            threshold = (settings or PipelineSettings()).threshold
        self.threshold: Threshold = normalize_threshold(threshold)
        if isinstance(self.threshold, int):
            keywords["threshold"] = self.threshold
        # One pipeline (one circuit breaker); a fraction threshold is resolved per
        # call and passed to ``compress``, which derives the tail from it.
        self._counts_with_model = isinstance(token_counter, str) and token_counter in (
            "model",
            "exact",
        )
        self.pipeline = ContextPipeline(
            settings, model=model, token_counter=token_counter, **keywords
        )
        self.token_counter: TokenCounter = self.pipeline.token_counter
        self._warn = WarnOnce()
        self._recall_tool = recall_tool
        self.cache_control = cache_control
        self._fresh()

    transient = ("tools", "_tool_tokens")
    """A copy (or a pickle) builds its own ``recall`` tool (whose generated argument
    schema cannot be pickled) and starts with no remembered tool counts (a cache that
    holds the agent's tools, which may not copy)."""

    def _fresh(self) -> None:
        self._tool_tokens: OrderedDict[Hashable, tuple[Sequence[Any], int]] = OrderedDict()
        # The agent's full history stays in state: recall reads the originals there.
        self.tools = [create_recall_tool()] if self._recall_tool else []

    # -- budget ------------------------------------------------------------------------

    def _tools_tokens(self, tools: Sequence[Any]) -> int:
        if not tools:
            return 0
        # Keyed by content, so a description edited in place is counted again.
        key = tools_fingerprint(tools)
        hit = self._tool_tokens.get(key)
        if hit is not None and not self._counts_with_model:
            return hit[1]
        tokens = tools_tokens(self.token_counter, tools)
        # The tools are kept alive with their count, so the ids in the key cannot be reused.
        self._tool_tokens[key] = (tuple(tools), tokens)
        if len(self._tool_tokens) > _TOOL_COUNTS_KEPT:
            self._tool_tokens.popitem(last=False)
        return tokens

    def _budget(self, request: ModelRequest[Any]) -> Budget:
        """Return this request's threshold and the tokens its other parts take."""
        total = resolve_threshold(self.threshold, request.model)
        too_big = window_warning(total, request.model)
        if too_big is not None:
            self._warn.warning("%s", too_big)
        reserved = self._tools_tokens(request.tools)
        if request.system_message is not None:
            reserved += int(self.token_counter([request.system_message]))
        return Budget(total, reserved)

    # -- the turn ----------------------------------------------------------------------

    def _request(
        self, request: ModelRequest[Any], messages: list[BaseMessage], result: CompressionResult
    ) -> ModelRequest[Any]:
        if result.messages is not messages:
            request = request.override(messages=cast(list[AnyMessage], list(result.messages)))
        if self.cache_control:
            request = hint_request(request, result.report.stable_prefix)
        return request

    def _response(
        self,
        response: ModelResponse[Any],
        read: TurnInput,
        result: CompressionResult,
        sent: Calibration,
        model: Any,
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        update = summary_update(SUMMARY_STATE_KEY, read.stored, result)
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        # The reply came back within this call: nothing awaits a count.
        new = observe(sent, reply, model_identity(model), self._warn).to_dict()
        if new != (read.stored_calibration or Calibration().to_dict()):
            update[CALIBRATION_STATE_KEY] = new
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _retry(
        self, budget: Budget, error: Exception, sent: Calibration
    ) -> tuple[Calibration, int] | None:
        """Return the tightened calibration and the retry's budget, or ``None``.

        ``None`` when ``error`` is not a context-length error, or when the messages
        have no room left to shrink into (the system prompt and tools alone are
        too much): the error then reaches the caller as the model raised it.
        """
        overflow = overflow_of(error)
        if overflow is None:
            return None
        within = sent.retry_budget(budget.threshold, overflow.requested, overflow.window)
        if within <= budget.reserved:
            return None
        logger.warning(
            "the model rejected the request as too long (%s); retrying once within a "
            "budget of %d tokens",
            error,
            within,
        )
        return sent.after_overflow(overflow.requested, overflow.window), within

    def _turn(
        self, request: ModelRequest[Any]
    ) -> Turn[ModelResponse[Any] | ExtendedModelResponse[Any]]:
        """One model call: yields :class:`Compress` steps and the requests to send.

        State is read once. A context-length error thrown in at the model call leads
        to one retry within a budget tightened by the overshoot it reports (below
        what the rejected request sent); a second one reaches the caller.
        """
        read = read_turn(request.state, list(request.messages), SUMMARY_STATE_KEY)
        token = counting_model(request.model) if self._counts_with_model else None
        try:
            budget = self._budget(request)
            seed = request_seed(request.system_message, request.tools)
            calibration = read.calibration
            # An agent mid-run degrades (with a warning) rather than stop.
            first = calibration.first_budget(budget.threshold)
            args = compress_args(read.carried, first, budget.reserved, "minimal", calibration)
            fit = partial(refit, calibration, budget, seed)
            result, args = yield Compress(read.messages, args, fit, FIT_ATTEMPTS)
            sent = sending(calibration, budget, seed, result, args["threshold"])
            emit(result.report)
            try:
                response = yield self._request(request, read.messages, result)
            except Exception as error:
                retry = self._retry(budget, error, sent)
                if retry is None:
                    raise
                tighter, within = retry
                args = compress_args(read.carried, within, budget.reserved, "minimal", calibration)
                result, args = yield Compress(read.messages, carry_over(args, result))
                sent = sending(tighter, budget, seed, result, within)
                emit(result.report)
                response = yield self._request(request, read.messages, result)
        finally:
            if token is not None:
                reset_counting_model(token)
        return self._response(response, read, result, sent, request.model)

    # -- AgentMiddleware ---------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Compress the request's messages, call the model, keep the carried summary.

        A context-length error from the model leads to one retry within a budget
        tightened by the overshoot it reports (below what the rejected request sent);
        a second one reaches the caller, as the model raised it.
        """

        def answer(step: Any) -> Any:
            return step.run(self.pipeline) if isinstance(step, Compress) else handler(step)

        return drive(self._turn(request), answer)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`: the summarizer is awaited."""

        async def answer(step: Any) -> Any:
            return await (step.arun(self.pipeline) if isinstance(step, Compress) else handler(step))

        return await adrive(self._turn(request), answer)
