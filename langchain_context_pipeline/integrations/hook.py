"""The LangGraph pre-model hook node: :class:`ContextPipelineHook` and its state.

Built by :func:`~langchain_context_pipeline.langgraph.create_pre_model_hook`, which
checks its arguments; see :mod:`langchain_context_pipeline.langgraph` for the modes.
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
        "langchain_context_pipeline.integrations.hook needs LangGraph: "
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
from langchain_context_pipeline.tokens.calibration import (
    CALIBRATION_STATE_KEY,
    FIT_ATTEMPTS,
    Calibration,
    model_identity,
)

__all__ = [
    "DEFAULT_SUMMARY_KEY",
    "ContextPipelineHook",
    "ContextPipelineState",
    "HookMode",
]


DEFAULT_SUMMARY_KEY = SUMMARY_STATE_KEY
"""The state key that holds the carried summary (``CarriedSummary.to_dict()``); the
agent middleware uses the same key."""

HookMode = Literal["ephemeral", "persist"]
"""``"ephemeral"``: compress what the model sees; ``"persist"``: rewrite ``messages``."""


logger = logging.getLogger("langchain_context_pipeline")

MODES: tuple[str, ...] = ("ephemeral", "persist")
RESERVED_KEYS = frozenset({"messages", "llm_input_messages", "remaining_steps"})


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

        Both modes hold the output to what the counted prefix it still repeats allows
        and record what is sent, for the reply's usage to calibrate the next call.
        Ephemeral: the model gets the smallest valid request when the budget cannot
        be met; persist: :class:`BudgetError` (see the module).
        """
        read = read_graph_state(state, self.summary_key, persist=self.mode == "persist")
        calibration = learn_from_history(read, self.agent, self._warn)
        budget = self.budget
        ephemeral = self.mode == "ephemeral"
        over_budget: OverBudget = "minimal" if ephemeral else "raise"
        args = compress_args(
            read.carried,
            self._threshold(calibration),
            budget.reserved,
            over_budget,
            calibration if ephemeral else None,
        )
        fit = partial(refit, calibration, budget, self.seed)
        result, _ = yield Compress(read.messages, args, fit, FIT_ATTEMPTS)
        store, thread = self._archive() if result.messages is not read.messages else (None, None)
        if store is not None:
            result = yield _Archive(store, thread, read.messages, result)
        threshold = result.report.threshold
        # The history the reply will follow: persisted, the output replaces it.
        history = read.messages if ephemeral else result.messages
        sent = sending(calibration, budget, self.seed, result, threshold, history)
        emit(result.report)
        return {**self._update(read, result), CALIBRATION_STATE_KEY: sent.to_dict()}

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
def hook_class(summary_key: str) -> type[ContextPipelineHook]:
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
