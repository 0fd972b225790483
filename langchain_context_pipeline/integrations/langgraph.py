"""LangGraph entry point: a pre-model hook that keeps every model call under budget.

Use it with ``create_react_agent(..., pre_model_hook=hook)`` or as a node of a
hand-built ``StateGraph`` placed before the node that calls the model:

    >>> from langchain_context_pipeline.integrations.langgraph import create_pre_model_hook
    >>> from langchain_context_pipeline import DIGEST
    >>> hook = create_pre_model_hook(threshold=16000, model=DIGEST)
    >>> hook.mode, hook.pipeline.threshold
    ('ephemeral', 16000)

In the default ``"ephemeral"`` mode the hook returns ``{"llm_input_messages": ...}``
on every call: the model sees the compressed list while the full history stays in
``messages`` (nothing is lost). The summary it wrote is kept in state as a carried
summary, so the next turn reuses it and the summarizer runs again only when the
turns it does not cover no longer fit. In ``"persist"`` mode the hook rewrites
``messages`` itself (``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` and the compressed
list), and only when something changed.

When the system messages alone exceed the budget, the ephemeral hook logs a
warning naming the sizes and the model gets the smallest valid request (the system
messages and the newest turn cut to its minimum, tool calls with their results),
as the agent middleware does: only this call's view is affected, the history stays
in ``messages``. The persist hook raises :class:`~langchain_context_pipeline.errors.BudgetError`
instead: what it returns is written into ``messages`` for good, and the smallest
request would replace the whole history, the task included, to work around a
budget that no compression can meet (raise the threshold or shorten the system
messages).

The hook declares the state keys it reads, so LangGraph adds the summary key as a
channel of any graph the hook is a node of: ``create_react_agent``'s default state
schema works without ``state_schema=``. :class:`ContextPipelineState` is there for
users who want the summary in a typed key of their own schema.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

try:
    from langgraph.store.base import BaseStore
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "langchain_context_pipeline.integrations.langgraph needs LangGraph: "
        "pip install 'langchain-context-pipeline[langgraph]'"
    ) from exc

from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.integrations.hook import (
    DEFAULT_SUMMARY_KEY,
    MODES,
    RESERVED_KEYS,
    ContextPipelineHook,
    ContextPipelineState,
    HookMode,
    hook_class,
)
from langchain_context_pipeline.stages.settings import PipelineSettings, settings_or_model
from langchain_context_pipeline.tokens.calibration import (
    request_overhead,
    request_seed,
)
from langchain_context_pipeline.tokens.exact import exact_token_counter
from langchain_context_pipeline.tokens.threshold import Threshold, resolve_threshold, window_warning

__all__ = [
    "DEFAULT_SUMMARY_KEY",
    "ContextPipelineHook",
    "ContextPipelineState",
    "HookMode",
    "Threshold",
    "create_pre_model_hook",
    "resolve_threshold",
]

logger = logging.getLogger("langchain_context_pipeline")


def create_pre_model_hook(
    pipeline: ContextPipeline | PipelineSettings | Any = None,
    *,
    mode: HookMode = "ephemeral",
    summary_key: str = DEFAULT_SUMMARY_KEY,
    threshold: Threshold | None = None,
    agent_model: Any = None,
    system_prompt: str | BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: PipelineSettings | None = None,
    model: Any = None,
    token_counter: Any = None,
    store: BaseStore | None = None,
    **keywords: Any,
) -> ContextPipelineHook:
    """Return a node that keeps the conversation under budget before each model call.

    When the system messages alone exceed the budget, the ephemeral hook sends the
    smallest valid request with a warning; the persist hook raises
    :class:`~langchain_context_pipeline.errors.BudgetError` (see the module docstring).

    Args:
        pipeline: a configured :class:`ContextPipeline`; or leave it out and give
            its settings here, as :class:`ContextPipeline` takes them. Settings or
            the summarizer may stand here too (``create_pre_model_hook(model)`` is
            ``model=model``), as :class:`ContextPipeline` takes them positionally.
        mode: ``"ephemeral"`` (default) returns ``{"llm_input_messages": ...}`` on
            every call and keeps the full history in ``messages``; ``"persist"``
            returns ``{"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), ...]}``,
            only when something changed.
        summary_key: the state key of the carried summary (in persist mode, the
            record of which message in ``messages`` is the summary).
        threshold: the budget in tokens (an int or ``("tokens", n)``), or
            ``("fraction", share)`` of the agent model's ``profile["max_input_tokens"]``
            (needs ``agent_model``). A token count above ``agent_model``'s
            ``max_input_tokens`` is warned about.
        agent_model: the agent's chat model: needed for a fraction threshold and for
            ``token_counter="model"``; with it, calibration ignores usage reported
            by any other model.
        system_prompt: the system prompt the agent sends beside the messages
            (``create_react_agent``'s ``prompt``, when it is a string or message).
        tools: the tools the agent binds to its model. The hook cannot see either in
            state: given here, they are counted in every request, so that the budget
            and the calibration cover the whole request, as the provider's reported
            usage does (without them, leave headroom for them in ``threshold``).
        settings: :class:`PipelineSettings` for the pipeline.
        model: the summarizer (see :class:`ContextPipeline`).
        token_counter: the token counter (see :class:`ContextPipeline`);
            ``"model"`` counts with ``agent_model``; ``"exact"`` with its tokenizer
            when one is available offline, else the default estimate with a warning.
        store: in persist mode, the LangGraph store that keeps the originals a
            pass replaces, for the ``recall`` tool (default: the graph's store,
            if it was compiled with one); keyed by the run's ``thread_id``.
        **keywords: any other :class:`ContextPipeline` setting by name
            (``tail_budget``, ``head_count``, ``tool_output_limit``, ...).

    Returns:
        The node: pass it as ``create_react_agent(..., pre_model_hook=hook)``, or add
        it to a ``StateGraph`` before the node that calls the model (which should
        read ``llm_input_messages`` in ephemeral mode).

    Raises:
        ValueError: for an unknown mode or summary key, both a pipeline and its
            settings, a fraction threshold the agent model's profile cannot
            resolve, or a system prompt and tools that leave no room for messages.
        TypeError: for an unknown setting.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> hook = create_pre_model_hook(threshold=8000, tail_budget=2000, mode="persist")
        >>> update = hook({"messages": [HumanMessage("hi")]})
        >>> list(update)  # under budget: no messages rewritten, only what was sent recorded
        ['context_pipeline_calibration']
    """
    if mode not in MODES:
        raise ValueError(f"mode must be 'ephemeral' or 'persist', got {mode!r}")
    if not isinstance(summary_key, str) or not summary_key.isidentifier():
        raise ValueError(f"summary_key must be an identifier, got {summary_key!r}")
    if summary_key in RESERVED_KEYS:
        raise ValueError(f"summary_key {summary_key!r} is a key the agent itself uses")
    if pipeline is not None and not isinstance(pipeline, ContextPipeline):
        first, model = settings_or_model(pipeline, model, also="a ContextPipeline, ")
        if first is not None and settings is not None:
            raise TypeError("settings were given twice: positionally and as settings=")
        pipeline, settings = None, first or settings
    named = {"threshold": threshold, "agent_model": agent_model, "settings": settings}
    named |= {"model": model, "token_counter": token_counter}
    given = {name for name, value in named.items() if value is not None} | set(keywords)
    if pipeline is not None:
        if given:
            raise ValueError(
                f"pass either a ContextPipeline or its settings, not both (got {sorted(given)})"
            )
    else:
        if threshold is not None:
            keywords["threshold"] = resolve_threshold(threshold, agent_model)
        if isinstance(token_counter, str) and token_counter in ("model", "exact"):
            if agent_model is None:
                raise ValueError(
                    f"token_counter={token_counter!r} needs agent_model, the agent's chat model"
                )
            exact = token_counter == "exact"
            token_counter = (
                exact_token_counter(agent_model, fallback=True) if exact else agent_model
            )
        pipeline = ContextPipeline(settings, model=model, token_counter=token_counter, **keywords)
        too_big = None if agent_model is None else window_warning(pipeline.threshold, agent_model)
        if too_big is not None:
            logger.warning("%s", too_big)
    reserved = request_overhead(pipeline.token_counter, system_prompt, tools)
    if reserved >= pipeline.threshold:
        raise ValueError(
            f"the system prompt and tools take {reserved} tokens: nothing is left of "
            f"threshold {pipeline.threshold} for the messages"
        )
    return hook_class(summary_key)(
        pipeline,
        mode=mode,
        summary_key=summary_key,
        agent_model=agent_model,
        store=store,
        reserved_tokens=reserved,
        seed=request_seed(system_prompt, tools),
    )
