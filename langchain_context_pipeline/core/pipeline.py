"""ContextPipeline: keep every model call under a token budget, cheapest way first.

1. estimate: at or under ``threshold``, the input list itself comes back untouched;
2. prune: free, mechanical trimming of old, bulky content;
3. condense: one summary of the middle turns (an LLM, or the deterministic digest);
4. truncate: drop middle units and cut what must be kept, so the budget holds.

One planner (:class:`~langchain_context_pipeline.core.planner.PassPlanner`) serves
every entry point (LCEL, the LangGraph hook, the agent middleware, the command
line); the sync and async shells here differ only in how the summarizer is called.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, get_args

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langchain_context_pipeline.core.events import attach_report
from langchain_context_pipeline.core.planner import OverBudget, PassPlanner, PlanRequest
from langchain_context_pipeline.core.report import CompressionReport, CompressionResult
from langchain_context_pipeline.errors import check_int
from langchain_context_pipeline.messages.anatomy import one_pass
from langchain_context_pipeline.messages.cache_hint import PrefixWatch
from langchain_context_pipeline.messages.coerce import coerce_messages
from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.condenser import Condenser
from langchain_context_pipeline.stages.hysteresis import StandingCuts
from langchain_context_pipeline.stages.model_call import Reply, SummaryRequest, adrive, drive
from langchain_context_pipeline.stages.pruner import Pruner
from langchain_context_pipeline.stages.runnable import MessagesRunnable
from langchain_context_pipeline.stages.settings import PipelineSettings, settings_or_model
from langchain_context_pipeline.stages.summary_memory import SummaryMemory
from langchain_context_pipeline.tokens.counters import resolve_token_counter
from langchain_context_pipeline.tokens.threshold import token_count

__all__ = ["ContextPipeline", "OverBudget"]

PassPlan = Generator[PlanRequest, Reply, CompressionResult]
"""One pass as the planner plans it (see :meth:`PassPlanner.plan`)."""


class ContextPipeline(PassPlanner, MessagesRunnable):
    r"""Keep a conversation under ``threshold`` tokens: prune, condense, truncate.

    A Runnable over ``list[BaseMessage]`` (a ``PromptValue``, OpenAI-style dicts
    and tuples are accepted too), so ``prompt | pipeline | model`` works.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> pipeline = ContextPipeline(threshold=1000, tail_budget=200)
        >>> call = {"name": "bash", "args": {"command": "pytest"}, "id": "c1"}
        >>> history = [
        ...     HumanMessage("fix the failing test"),
        ...     AIMessage("", tool_calls=[call]),
        ...     ToolMessage("FAILED test_x\n" * 600, tool_call_id="c1"),
        ...     AIMessage("It fails in test_x; let me look."),
        ... ]
        >>> result = pipeline.compress(history)
        >>> result.messages[2].content
        '[bash] "pytest" -> 600 lines output; last: FAILED test_x ref=fae52a7c'
        >>> result.report.stages, result.report.tokens_after <= 1000
        (['prune'], True)
    """

    name: str = "ContextPipeline"

    def __init__(
        self,
        settings: PipelineSettings | Any = None,
        *,
        model: Any = None,
        token_counter: Any = None,
        summary_memory: SummaryMemory | bool = True,
        **keywords: Any,
    ) -> None:
        """Configure the pipeline.

        Args:
            settings: every size and limit (:class:`PipelineSettings`); defaults to
                the seed's. The summarizer may stand here instead, as
                ``SummarizationMiddleware(model)`` takes it: ``ContextPipeline(model)``
                is ``ContextPipeline(model=model)``.
            model: the summarizer: a ``BaseChatModel``, Runnable, callable or
                ``"provider:model"`` name; :data:`DIGEST` for the deterministic
                digest; ``None`` to skip condensing (hard truncation follows pruning).
            token_counter: ``None``/``"estimate"``, ``"approximate"``, ``"tiktoken"``,
                a ``BaseChatModel`` or a callable over a list of messages; or
                ``"model"`` / ``"exact"``, the agent model's own count, which only the
                hook and the middleware can give (they set the agent's model per
                call; :meth:`compress` called directly raises ``RuntimeError``: pass
                ``exact_token_counter(model)`` instead).
            summary_memory: where the model's summaries are remembered by the span
                they replace, so a caller that carries no summary (an LCEL chain
                called per turn) pays for each once: ``True`` for a memory of this
                instance, a :class:`SummaryMemory` (to share one, or with a store
                for many processes), ``False`` to remember nothing.
            **keywords: any :class:`PipelineSettings`, :class:`PruneSettings` or
                :class:`CondenseSettings` field by name (``threshold=``,
                ``tail_budget=``, ``tool_output_limit=``, ``summary_timeout=``, ...),
                overriding ``settings``.

        Raises:
            ValueError: for inconsistent settings, e.g. ``tail_budget >= threshold``.
            TypeError: for an unknown keyword, a summarizer of the wrong type, or one
                given both positionally and as ``model=``.
        """
        settings, model = settings_or_model(settings, model)
        self.settings = PipelineSettings.from_keywords(settings, **keywords)
        self.token_counter = resolve_token_counter(token_counter)
        self.pruner = Pruner(
            self.settings.prune,
            tail_budget=self.settings.tail_budget,
            token_counter=self.token_counter,
        )
        if summary_memory is True:
            summary_memory = SummaryMemory()
        if summary_memory is not False and not isinstance(summary_memory, SummaryMemory):
            raise TypeError(
                "summary_memory must be True, False or a SummaryMemory, got "
                f"{type(summary_memory).__name__}"
            )
        self.summary_memory: SummaryMemory | None = (
            None if summary_memory is False else summary_memory
        )
        self._prefixes = PrefixWatch()
        self.condenser: Condenser | None = None
        if model is not None:
            self.condenser = Condenser(
                model,
                self.settings.condense,
                head_count=self.settings.head_count,
                tail_budget=self.settings.tail_budget,
                token_counter=self.token_counter,
                briefs=self.settings.prune.briefs,
            )

    @property
    def threshold(self) -> int:
        """The budget in tokens (``settings.threshold``)."""
        return self.settings.threshold

    @property
    def tail_budget(self) -> int:
        """Tokens of newest messages kept verbatim (``settings.tail_budget``)."""
        return self.settings.tail_budget

    @property
    def head_count(self) -> int:
        """The first N messages kept verbatim (``settings.head_count``)."""
        return self.settings.head_count

    @property
    def model(self) -> Any:
        """The summarizer, or ``None``."""
        return None if self.condenser is None else self.condenser.model

    # -- sync and async shells --------------------------------------------------------

    def _prepare(
        self,
        messages: Any,
        carried_summary: CarriedSummary | None,
        reserved_tokens: int,
        threshold: int | None,
        over_budget: OverBudget,
        standing_cuts: StandingCuts | None,
    ) -> tuple[PassPlan, Condenser | None, SummaryMemory | None]:
        """Return the pass planned for ``messages`` and who answers its requests."""
        check_int("reserved_tokens", reserved_tokens)
        if over_budget not in get_args(OverBudget):
            choices = " or ".join(repr(c) for c in get_args(OverBudget))
            msg = f"over_budget must be {choices}, got {over_budget!r}"
            raise ValueError(msg)
        total = self.settings.threshold if threshold is None else token_count(threshold)
        report = CompressionReport(total, limit=total - reserved_tokens, reserved=reserved_tokens)
        items = coerce_messages(messages)
        plan = self._plan_within(items, report, carried_summary, over_budget, standing_cuts)
        return plan, self.condenser, self.summary_memory

    def compress(
        self,
        messages: Any,
        *,
        carried_summary: CarriedSummary | None = None,
        reserved_tokens: int = 0,
        threshold: int | None = None,
        over_budget: OverBudget = "raise",
        standing_cuts: StandingCuts | None = None,
    ) -> CompressionResult:
        """Compress ``messages``; return the new list, the report and the carried summary.

        Args:
            messages: the conversation (messages, OpenAI-style dicts or a PromptValue).
            carried_summary: a summary carried from an earlier turn (see the hook).
            reserved_tokens: tokens of the same request spent elsewhere (a system
                prompt or tool schemas sent beside the messages): the messages get
                ``threshold - reserved_tokens``.
            threshold: this call's budget, when it differs from ``settings.threshold``
                (the middleware resolves a fraction of the model's window per call);
                a derived tail budget follows it.
            over_budget: when the budget cannot be met (``reserved_tokens`` leave no
                room, or the system messages alone exceed what is left):
                ``"raise"`` raises :class:`BudgetError`; ``"minimal"`` logs a warning
                and returns the smallest valid request (the system messages and the
                newest turn cut to its minimum, see
                :func:`~langchain_context_pipeline.stages.truncate.minimal_request`), over
                the budget by ``report.over_budget`` tokens.
            standing_cuts: where the conversation's previous request had its cuts
                (its ``report.cuts``): the cuts move only forward from there, so the
                previous requests' cached prefix stays whatever this call's budget
                (the hook and the middleware pass it).

        Raises:
            BudgetError: (a ``ValueError``) with ``over_budget="raise"``, when the
                budget cannot be met; it names the sizes.
            ValueError: for an ``over_budget`` that is neither ``"raise"`` nor
                ``"minimal"``, or a ``reserved_tokens`` that is not an int >= 0.
        """
        plan, condenser, memory = self._prepare(
            messages, carried_summary, reserved_tokens, threshold, over_budget, standing_cuts
        )

        def answer(request: PlanRequest) -> Reply:
            if isinstance(request, SummaryRequest):
                return None if condenser is None else condenser._answer(request)
            return None if memory is None else memory.answer(request)

        with one_pass():  # the pass reads each message once
            return drive(plan, answer)

    async def acompress(
        self,
        messages: Any,
        *,
        carried_summary: CarriedSummary | None = None,
        reserved_tokens: int = 0,
        threshold: int | None = None,
        over_budget: OverBudget = "raise",
        standing_cuts: StandingCuts | None = None,
    ) -> CompressionResult:
        """Async :meth:`compress`: only the summarizer call differs."""
        plan, condenser, memory = self._prepare(
            messages, carried_summary, reserved_tokens, threshold, over_budget, standing_cuts
        )

        async def answer(request: PlanRequest) -> Reply:
            if isinstance(request, SummaryRequest):
                return None if condenser is None else await condenser._aanswer(request)
            return None if memory is None else await memory.aanswer(request)

        with one_pass():
            return await adrive(plan, answer)

    # In a chain, the run of each call carries the report as metadata, as the hook's
    # and the middleware's passes do (see ``_events``).

    def _run(
        self, value: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        result = self.compress(value)
        attach_report(run_manager, result.report)
        return result.messages

    async def _arun(
        self, value: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        result = await self.acompress(value)
        attach_report(run_manager, result.report)
        return result.messages
