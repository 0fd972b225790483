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

import functools
import logging
from collections.abc import Sequence
from functools import partial
from typing import Annotated, Any, Literal, NamedTuple, cast

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from typing_extensions import NotRequired, TypedDict

try:
    from langgraph.config import get_config, get_store
    from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
    from langgraph.managed import RemainingSteps
    from langgraph.store.base import BaseStore
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "langchain_context_pipeline.integrations.langgraph needs LangGraph: "
        "pip install 'langchain-context-pipeline[langgraph]'"
    ) from exc

from langchain_context_pipeline.core.pipeline import ContextPipeline, OverBudget
from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.integrations.archive import (
    aarchive_originals,
    archive_originals,
    thread_of,
)
from langchain_context_pipeline.integrations.stream import emit
from langchain_context_pipeline.integrations.turn import (
    Budget,
    Compress,
    Turn,
    TurnInput,
    WarnOnce,
    adrive,
    compress_args,
    drive,
    learn_from_history,
    read_graph_state,
    refit,
    sending,
    state_keys,
    summary_update,
)
from langchain_context_pipeline.stages.carried import SUMMARY_STATE_KEY
from langchain_context_pipeline.stages.settings import PipelineSettings, settings_or_model
from langchain_context_pipeline.tokens.calibration import (
    CALIBRATION_STATE_KEY,
    FIT_ATTEMPTS,
    Calibration,
    model_identity,
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


DEFAULT_SUMMARY_KEY = SUMMARY_STATE_KEY
"""The state key that holds the carried summary (``CarriedSummary.to_dict()``); the
agent middleware uses the same key."""

HookMode = Literal["ephemeral", "persist"]
"""``"ephemeral"``: compress what the model sees; ``"persist"``: rewrite ``messages``."""


logger = logging.getLogger("langchain_context_pipeline")

_MODES: tuple[str, ...] = ("ephemeral", "persist")
_RESERVED_KEYS = frozenset({"messages", "llm_input_messages", "remaining_steps"})


# -- the hook ---------------------------------------------------------------------------


class _Archive(NamedTuple):
    """A step of the persist hook's turn: keep the originals a pass replaced, for recall."""

    store: BaseStore
    thread: str | None
    messages: list[BaseMessage]
    result: CompressionResult


class ContextPipelineState(TypedDict):
    """An agent state (``messages``, ``remaining_steps``) with the carried summary's key.

    Not needed for the hook to work (it adds the channel itself); use it when you
    want ``context_pipeline_summary`` in your own schema or in the agent's output.
    Declared here rather than taken from ``langgraph.prebuilt``, whose
    ``AgentState`` is deprecated.
    """

    messages: Annotated[Sequence[AnyMessage], add_messages]
    """The conversation."""
    remaining_steps: NotRequired[RemainingSteps]
    """Steps left before the recursion limit (managed by LangGraph)."""
    context_pipeline_summary: NotRequired[dict[str, Any] | None]
    """``CarriedSummary.to_dict()`` of the summary carried between turns, or None."""
    context_pipeline_calibration: NotRequired[dict[str, Any] | None]
    """The per-thread correction from the provider's reported usage (``Calibration``)."""


class ContextPipelineHook(Runnable[Any, dict[str, Any]]):
    """A graph node that compresses the conversation before each model call.

    Build it with :func:`create_pre_model_hook`. It is a Runnable (sync and async)
    and a callable, traced under its own name.
    """

    name: str = "context_pipeline_hook"

    def __init__(
        self,
        pipeline: ContextPipeline,
        *,
        mode: HookMode,
        summary_key: str,
        agent_model: Any = None,
        store: BaseStore | None = None,
        reserved_tokens: int = 0,
        seed: str = "",
    ) -> None:
        """Wrap ``pipeline``; see :func:`create_pre_model_hook` for the arguments.

        ``reserved_tokens`` are what each request spends beside the messages (the
        system prompt and tool schemas the agent adds), by the pipeline's counter;
        ``seed`` is their digest (:func:`~.calibration.request_seed`).
        """
        self.pipeline = pipeline
        self.reserved_tokens = reserved_tokens
        self.seed = seed
        self.agent = model_identity(agent_model) if agent_model is not None else (None, None)
        self._warn = WarnOnce()
        self.mode: HookMode = mode
        self.summary_key = summary_key
        self.store = store

    def __call__(self, state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        """Run the hook on ``state`` (same as :meth:`invoke`)."""
        return self.invoke(state, config)

    @property
    def InputType(self) -> Any:
        """The graph state the hook reads."""
        return dict[str, Any]

    @property
    def OutputType(self) -> Any:
        """The state update the hook returns."""
        return dict[str, Any]

    @property
    def budget(self) -> Budget:
        """The budget of every call: the pipeline's threshold and the reserved tokens."""
        return Budget(self.pipeline.threshold, self.reserved_tokens)

    # -- the turn ----------------------------------------------------------------------

    def _update(self, read: TurnInput, result: CompressionResult) -> dict[str, Any]:
        update: dict[str, Any]
        if self.mode == "persist":
            if result.messages is read.messages:
                return {}
            update = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages]}
        else:
            # Every call writes the channel: it persists between turns, and an empty
            # list would make the agent fall back to the full history.
            update = {"llm_input_messages": list(result.messages)}
        return {**update, **summary_update(self.summary_key, read.stored, result)}

    def _threshold(self, calibration: Calibration) -> int | None:
        budget = calibration.first_budget(self.pipeline.threshold)
        return None if budget == self.pipeline.threshold else budget

    def _archive(self) -> tuple[BaseStore | None, str | None]:
        """The store and thread the persist mode keeps originals in, for recall."""
        if self.mode != "persist":
            return None, None
        try:
            config: Any = get_config()
            store = self.store if self.store is not None else get_store()
        except (RuntimeError, KeyError):  # called outside a graph
            return self.store, None
        return store, thread_of(config)

    def _turn(self, state: Any) -> Turn[dict[str, Any]]:
        """One call: yields :class:`Compress` and :class:`_Archive` steps, returns the update.

        Ephemeral: the output is held to what the counted prefix it still repeats
        allows, and the model gets the smallest valid request when the budget cannot
        be met; persist: one pass, and :class:`BudgetError` (see the module).
        """
        read = read_graph_state(state, self.summary_key, persist=self.mode == "persist")
        calibration = learn_from_history(read, self.agent, self._warn)
        budget = self.budget
        ephemeral = self.mode == "ephemeral"
        over_budget: OverBudget = "minimal" if ephemeral else "raise"
        args = compress_args(
            read.carried, self._threshold(calibration), budget.reserved, over_budget
        )
        fit = partial(refit, calibration, budget, self.seed) if ephemeral else None
        result, _ = yield Compress(read.messages, args, fit, FIT_ATTEMPTS)
        store, thread = self._archive() if result.messages is not read.messages else (None, None)
        if store is not None:
            result = yield _Archive(store, thread, read.messages, result)
        after = read.messages[-1].id if read.messages else None
        sent = sending(calibration, budget, self.seed, result, result.report.threshold, after)
        emit(result.report)
        update = self._update(read, result)
        if ephemeral:  # persist mode writes only when messages change
            update[CALIBRATION_STATE_KEY] = sent.to_dict()
        return update

    def _run(self, state: Any) -> dict[str, Any]:
        def answer(step: Any) -> Any:
            if isinstance(step, Compress):
                return step.run(self.pipeline)
            return archive_originals(*step)

        return drive(self._turn(state), answer)

    async def _arun(self, state: Any) -> dict[str, Any]:
        async def answer(step: Any) -> Any:
            if isinstance(step, Compress):
                return await step.arun(self.pipeline)
            return await aarchive_originals(*step)

        return await adrive(self._turn(state), answer)

    # -- Runnable ----------------------------------------------------------------------

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Compress ``input["messages"]``; return the state update."""
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Async :meth:`invoke`: the summarizer is awaited."""
        return await self._acall_with_config(self._arun, input, config, run_type="chain")


@functools.lru_cache(maxsize=64)
def _hook_class(summary_key: str) -> type[ContextPipelineHook]:
    """Return a hook class whose ``__call__`` declares the state keys it reads.

    LangGraph reads a node's input schema from the type of its ``__call__``'s
    first parameter and adds that schema's keys as channels of the graph; so the
    summary key exists even in a graph whose own schema lacks it, and the hook
    sees ``llm_input_messages``, which ``create_react_agent`` declares only for
    its model node.
    """
    schema = cast(Any, TypedDict)("PreModelHookInput", state_keys(summary_key), total=False)

    def __call__(
        self: ContextPipelineHook, state: Any, config: RunnableConfig | None = None
    ) -> dict[str, Any]:
        return self.invoke(state, config)

    __call__.__annotations__ = {
        "state": schema,
        "config": RunnableConfig | None,
        "return": dict[str, Any],
    }
    __call__.__doc__ = ContextPipelineHook.__call__.__doc__
    namespace = {
        "__call__": __call__,
        "__module__": __name__,
        "__doc__": ContextPipelineHook.__doc__,
    }
    return cast(
        type[ContextPipelineHook], type("ContextPipelineHook", (ContextPipelineHook,), namespace)
    )


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
        >>> hook({"messages": [HumanMessage("hi")]})  # under budget: nothing to change
        {}
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be 'ephemeral' or 'persist', got {mode!r}")
    if not isinstance(summary_key, str) or not summary_key.isidentifier():
        raise ValueError(f"summary_key must be an identifier, got {summary_key!r}")
    if summary_key in _RESERVED_KEYS:
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
    return _hook_class(summary_key)(
        pipeline,
        mode=mode,
        summary_key=summary_key,
        agent_model=agent_model,
        store=store,
        reserved_tokens=reserved,
        seed=request_seed(system_prompt, tools),
    )
