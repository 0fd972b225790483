"""ContextPipeline: keep every model call under a token budget, cheapest way first.

1. estimate: at or under ``threshold``, the input list itself comes back untouched;
2. prune: free, mechanical trimming of old, bulky content;
3. condense: one summary of the middle turns (an LLM, or the deterministic digest);
4. truncate: drop middle units and cut what must be kept, so the budget holds.

One planner serves every entry point (LCEL, the LangGraph hook, the agent
middleware, the command line); its sync and async shells differ only in how the
summarizer is called.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import replace
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langchain_context_pipeline.core.model_call import Reply, SummaryRequest, adrive, drive
from langchain_context_pipeline.core.report import CompressionReport, CompressionResult
from langchain_context_pipeline.core.runnable import MessagesRunnable
from langchain_context_pipeline.core.settings import PipelineSettings, settings_or_model
from langchain_context_pipeline.errors import BudgetError, check_int
from langchain_context_pipeline.integrations.cache_hint import PrefixWatch
from langchain_context_pipeline.integrations.events import attach_report
from langchain_context_pipeline.messages.coerce import coerce_messages
from langchain_context_pipeline.messages.marks import is_pipeline_summary
from langchain_context_pipeline.messages.units import Split, Unit, head_end
from langchain_context_pipeline.stages.breaker import conversation_key
from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.condenser import Condenser, CondenseStats
from langchain_context_pipeline.stages.hysteresis import Cuts, settle
from langchain_context_pipeline.stages.pruner import Pruner
from langchain_context_pipeline.stages.summary_memory import (
    Prefixes,
    StoreRead,
    StoreWrite,
    SummaryMemory,
)
from langchain_context_pipeline.stages.truncate import (
    NotePricer,
    minimal_request,
    note_room,
    truncate,
)
from langchain_context_pipeline.tokens.counters import (
    estimate_message_tokens,
    resolve_token_counter,
)
from langchain_context_pipeline.tokens.meter import Meter
from langchain_context_pipeline.tokens.threshold import token_count

__all__ = ["ContextPipeline"]

logger = logging.getLogger("langchain_context_pipeline")

_Request = SummaryRequest | StoreRead | StoreWrite

OverBudget = Literal["raise", "minimal"]
"""What :meth:`ContextPipeline.compress` does when the budget cannot be met: raise
:class:`BudgetError`, or return the smallest valid request with a warning."""


class ContextPipeline(MessagesRunnable):
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
                a ``BaseChatModel`` or a callable over a list of messages.
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

    # -- the one planner --------------------------------------------------------------

    def _limits(self, threshold: int, reserved: int) -> tuple[int, int]:
        """Return this call's (limit, tail budget) once ``reserved`` tokens are set aside."""
        check_int("reserved_tokens", reserved)
        limit = threshold - reserved
        if limit < 1:
            raise BudgetError(
                f"reserved_tokens ({reserved}: what the request sends beside the messages, "
                f"such as a system prompt and tool schemas) leave nothing of threshold "
                f"{threshold} for the messages",
                required=reserved,
                budget=threshold,
            )
        tail = self.settings.tail_budget
        if threshold != self.settings.threshold:
            tail = self.settings.with_threshold(threshold).tail_budget
        if tail >= limit:
            logger.warning(
                "reserved_tokens %d leave %d tokens: tail_budget %d cut to %d for this call",
                reserved,
                limit,
                tail,
                limit // 2,
            )
            tail = limit // 2
        return limit, tail

    @staticmethod
    def _covered(
        messages: list[BaseMessage], where: Split, carried: CarriedSummary | None
    ) -> tuple[int, int] | None:
        """Return the span ``[start, stop)`` a carried summary stands for, if it applies.

        It applies when its signed mark verifies, when the message it covers through
        is there, after the head, and ends a unit (so putting the summary in its
        place orphans nothing).
        """
        if carried is None or not carried.verified:
            return None
        through = next((i for i, m in enumerate(messages) if m.id == carried.through), None)
        if through is None or through < where.head_end or through + 1 not in where.unit_ends:
            return None
        return where.head_end, through + 1

    def _summary_room(
        self, messages: list[BaseMessage], where: Split, limit: int, meter: Meter
    ) -> int | None:
        """Tokens a summary may take beside what truncation must keep, or None if too few.

        When the head, the system messages and the last unit (with the rest of the
        tail, or the removal note that would replace it) fill the budget by
        themselves, truncation would drop any summary: the call is not made;
        otherwise the summary is held to the room left, so truncation keeps it and
        the next turn carries it.
        """
        assert self.condenser is not None
        last = where.units[-1][0] if where.units else len(messages)
        must = sum(
            meter.one(m)
            for i, m in enumerate(messages)
            if i < where.head_end or i >= last or i in where.systems
        )
        # Kept whole, the rest of the tail leaves the summary what it does not take;
        # dropped by truncation, it leaves a removal note in its place.
        rest = sum(
            meter.one(messages[i])
            for i in range(max(where.tail_start, where.head_end), last)
            if i not in where.systems
        )
        room = limit - must - min(rest, note_room(limit, must, meter)[1])
        return room if room >= self.condenser.settings.min_summary_tokens else None

    def _low_water(self, limit: int) -> int:
        """Tokens a truncation brings the request down to (``low_water`` of ``limit``)."""
        return max(1, int(self.settings.low_water * limit))

    def _settle(
        self,
        messages: list[BaseMessage],
        where: Split,
        base: int,
        limit: int,
        tail: int,
        meter: Meter,
    ) -> tuple[Cuts, list[Unit]]:
        """Return where the cuts stand for ``messages`` and the units they index.

        The units are those from ``base`` on (after the head and a carried summary);
        the replay prices each unit as it is and as the Pruner leaves it (the
        Pruner's memo makes the second look at an old message free).
        """
        units = [u for u in where.units if u[0] >= base]
        if not units:
            return Cuts(0, 0), units
        pruned, _ = self.pruner.prune(messages, replace(where, tail_start=len(messages)))
        raw_costs = [meter.span(messages, *u) for u in units]
        pruned_costs = [meter.span(pruned, *u) for u in units]
        stays = [
            any(i in where.systems or is_pipeline_summary(messages[i]) for i in range(*u))
            for u in units
        ]
        fixed = meter.span(messages, 0, base)
        # The note is priced without building it at every step (see ``NotePricer``).
        note = NotePricer(pruned, units, stays, note_room(limit, 0, meter)[0], meter)
        cuts = settle(
            raw_costs,
            pruned_costs,
            stays,
            fixed=fixed,
            limit=limit,
            low_water=self._low_water(limit),
            tail_budget=tail,
            note=note,
        )
        return cuts, units

    def plan(
        self,
        messages: list[BaseMessage],
        report: CompressionReport,
        carried: CarriedSummary | None = None,
    ) -> Generator[_Request, Reply, CompressionResult]:
        """Plan the compressed list; yields a request when the summarizer (or store) is needed."""
        limit, tail = self._limits(report.threshold, report.limit)
        report.limit = limit
        meter = Meter(self.token_counter)
        work = messages
        # The no-op path costs one count; with the default estimate, that count is
        # kept per message for the stages that follow.
        counts: list[int] | None = None
        if meter.additive:
            counts = [estimate_message_tokens(m) for m in messages]
            tokens = sum(counts)
        else:
            tokens = int(self.token_counter(messages))
        report.tokens_before = tokens
        if tokens <= limit and (carried is None or not carried.verified):
            # Nothing to compress and no summary to put in: the list itself, whose
            # stable prefix is its head (no need to split it into units).
            report.tokens_after = tokens
            report.stable_prefix = head_end(messages, self.settings.head_count)
            self._observe(messages, messages, report, meter, counts)
            return CompressionResult(messages, report, None)
        where = Split.of(messages, self.settings.head_count)
        covered = self._covered(messages, where, carried)
        has_model = self.condenser is not None and self.condenser.model is not None
        memory = self.summary_memory if has_model else None
        prefixes = Prefixes(messages)
        if covered is None and memory is not None and tokens > limit:
            recalled = yield from self._recall(memory, prefixes, where)
            if recalled is not None:
                covered, carried = (where.head_end, recalled[0]), recalled[1]
        shift = substituted_end = 0
        condensed: tuple[list[BaseMessage], Split] | None = None
        if covered is not None and carried is not None:
            # The carried summary takes the place of the turns it covers; the system
            # messages among them stay, before it (they are never summarized).
            start, stop = covered
            kept = [i for i in range(start, stop) if i in where.systems]
            work = [*messages[:start], *(messages[i] for i in kept), carried.message]
            work += messages[stop:]
            where = where.substitute(start, stop, len(kept))
            substituted_end = start + len(kept) + 1
            shift = stop - substituted_end
            report.summary_reused = True
            if counts is not None:  # the counts just taken serve the new list too
                tokens = sum(counts[:start]) + sum(counts[i] for i in kept) + sum(counts[stop:])
                tokens += estimate_message_tokens(carried.message)
            else:
                tokens = meter.total(work)
        if counts is not None:
            meter.seed(messages, counts)
        if tokens <= limit:
            report.tokens_after = tokens
            report.stable_prefix = substituted_end if report.summary_reused else where.head_end
            self._observe(messages, work, report, meter)
            return CompressionResult(work, report, carried if report.summary_reused else None)

        first: int | None = None
        if self.condenser is None:
            # Hysteresis: the prune boundary and the truncation cut move only when the
            # request would overflow with them as they stand; then everything older
            # than the tail is pruned and, only if that is not enough, truncation brings
            # the request down to the low-water mark (see ``_hysteresis``): no cut
            # (``first`` None) when what fits once pruned needs none.
            base = substituted_end if report.summary_reused else where.head_end
            cuts, units = self._settle(work, where, base, limit, tail, meter)
            tail_start = units[cuts.prune][0] if cuts.prune < len(units) else len(work)
            where = replace(where, tail_start=tail_start)
            first = units[cuts.drop][0] if cuts.drop else None
        else:
            # With a summarizer, the tail starts at a checkpoint every
            # (1 - low_water) x limit tokens, and a summary is written only when pruning
            # cannot bring the request under the limit: a summary costs a model call
            # and its own tokens, so it is not spent to reach the low-water mark.
            step = round((1 - self.settings.low_water) * limit)
            where = where.with_tail(work, tail, meter, step)
        before_prune = work
        work, report.prune = self.pruner.prune(work, where)
        tail_ids = {id(m) for m in work[where.tail_start :]}
        report.stages.append("prune")
        if meter.additive:  # only the messages the Pruner replaced are counted again
            tokens += sum(
                meter.one(new) - meter.one(old)
                for new, old in zip(work, before_prune, strict=True)
                if new is not old
            )
        else:
            tokens = meter.total(work)
        report.prune.tokens_after = tokens

        room = (
            self._summary_room(work, where, limit, meter)
            if tokens > limit and self.condenser is not None
            else None
        )
        if room is not None and self.condenser is not None:
            report.condense = CondenseStats()
            work = yield from self.condenser.plan(work, where, meter, report.condense, room)
            if memory is not None and where.tail_start >= substituted_end:
                condensed = (work, where)
            report.stages.append("condense")
            report.breaker_open = report.condense.breaker_open
            tokens = report.condense.tokens_after = meter.total(work)
            where = Split.of(work, self.settings.head_count)

        if tokens > limit or first is not None:
            work, report.truncate = truncate(work, where, limit, meter, first=first)
            report.stages.append("truncate")
            tokens = report.truncate.tokens_after = meter.total(work)
        report.tokens_after = tokens
        if condensed is not None and memory is not None:
            # Remembered only when the output keeps it: a summary that truncation
            # dropped is not carried, so recalling it later would differ from a
            # fresh pipeline given the same carried summary.
            yield from self._remember(memory, prefixes, *condensed, shift, report, kept=work)
        report.stable_prefix = next((i for i, m in enumerate(work) if id(m) in tail_ids), 0)
        carried_out = CarriedSummary.of(work)
        if carried_out is None and report.summary_reused and carried is not None:
            carried_out = carried if any(m is carried.message for m in work) else None
        self._observe(messages, work, report, meter)
        return CompressionResult(work, report, carried_out)

    def _observe(
        self,
        messages: list[BaseMessage],
        out: list[BaseMessage],
        report: CompressionReport,
        meter: Meter,
        counts: list[int] | None = None,
    ) -> None:
        """Report how much of ``out`` repeats the conversation's previous request.

        ``counts`` are the per-message counts of ``out`` when they are at hand.
        """
        repeated = self._prefixes.observe(conversation_key(messages), out)
        if repeated is None:
            return
        # The default estimate's per-message counts are at hand (or cached by the
        # meter); another counter is asked once, for the repeated prefix.
        if counts is not None:
            tokens = sum(counts[:repeated])
        elif meter.additive:
            tokens = meter.span(out, 0, repeated)
        else:
            tokens = meter.total(out[:repeated]) if repeated else 0
        report.cached_prefix_tokens = tokens
        report.cached_prefix_share = min(tokens / max(report.tokens_after, 1), 1.0)

    def _plan_within(
        self,
        messages: list[BaseMessage],
        report: CompressionReport,
        carried: CarriedSummary | None,
        reserved: int,
        over_budget: OverBudget,
    ) -> Generator[_Request, Reply, CompressionResult]:
        """Run :meth:`plan`, or give the smallest valid request for a budget it cannot meet.

        Only with ``over_budget="minimal"``; otherwise :class:`BudgetError` is raised.
        """
        try:
            return (yield from self.plan(messages, report, carried))
        except BudgetError as error:
            if over_budget != "minimal":
                raise
            return self._minimal(messages, report.threshold, reserved, carried, error)

    def _minimal(
        self,
        messages: list[BaseMessage],
        threshold: int,
        reserved: int,
        carried: CarriedSummary | None,
        error: BudgetError,
    ) -> CompressionResult:
        """Return :func:`minimal_request` of ``messages`` and log why it is sent.

        The carried summary is passed on unchanged: it still stands for its turns.
        """
        meter = Meter(self.token_counter)
        limit = threshold - reserved
        out, stats = minimal_request(messages, Split.of(messages, self.settings.head_count), meter)
        report = CompressionReport(threshold, limit=limit, tokens_before=meter.total(messages))
        report.tokens_after = stats.tokens_after = meter.total(out)
        report.truncate = stats
        report.stages.append("minimal")
        report.over_budget = max(report.tokens_after - max(limit, 0), 0)
        self._observe(messages, out, report, meter)
        logger.warning(
            "%s; sending the smallest valid request instead (the system messages and the "
            "newest turn cut to its minimum, %d of %d messages): %d tokens for the messages, "
            "%d over their limit of %d",
            error,
            len(out),
            len(messages),
            report.tokens_after,
            report.over_budget,
            limit,
        )
        return CompressionResult(out, report, carried)

    # -- summaries remembered by span ------------------------------------------------

    @staticmethod
    def _recall(
        memory: SummaryMemory, prefixes: Prefixes, where: Split
    ) -> Generator[_Request, Reply, tuple[int, CarriedSummary] | None]:
        """Find the longest remembered summary of a span ``[head_end, stop)``.

        Returns ``stop`` (a unit end of this list) and the summary, or None.
        """
        start = where.head_end
        if start >= where.size:
            return None
        anchor = memory.anchor(prefixes, start)
        if memory.store is not None and not memory.known(anchor):
            yield StoreRead(anchor)
        stops = sorted(end for end in where.unit_ends if end > start)
        return memory.lookup(prefixes, start, stops)

    @staticmethod
    def _remember(
        memory: SummaryMemory,
        prefixes: Prefixes,
        work: list[BaseMessage],
        where: Split,
        shift: int,
        report: CompressionReport,
        kept: list[BaseMessage],
    ) -> Generator[_Request, Reply, None]:
        """Remember the summary the model just wrote, by the caller's span it replaces.

        ``work`` and ``where`` are the list right after condensing; ``kept`` is the
        pass's output, which must still hold the summary unchanged.
        """
        if report.condense is None or report.condense.source != "model":
            return
        middle = range(where.head_end, where.tail_start)
        index = where.head_end + sum(1 for i in middle if i in where.systems)
        if index >= len(work) or not is_pipeline_summary(work[index]):
            return
        if not any(m is work[index] for m in kept):
            return
        summary = CarriedSummary.of(work[index : index + 1])
        if summary is None:  # a span without ids: the summary stands through nothing named
            summary = CarriedSummary(message=work[index], through="")
        stop = where.tail_start + shift
        anchor, entries = memory.remember(prefixes, where.head_end, stop, summary)
        if memory.store is not None:
            yield StoreWrite(anchor, entries)

    # -- sync and async shells --------------------------------------------------------

    def _start(
        self, messages: Any, reserved_tokens: int, threshold: int | None
    ) -> tuple[list[BaseMessage], CompressionReport]:
        total = self.settings.threshold if threshold is None else token_count(threshold)
        # ``limit`` holds the reserved tokens until the planner turns them into the limit.
        return coerce_messages(messages), CompressionReport(total, limit=reserved_tokens)

    def compress(
        self,
        messages: Any,
        *,
        carried_summary: CarriedSummary | None = None,
        reserved_tokens: int = 0,
        threshold: int | None = None,
        over_budget: OverBudget = "raise",
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

        Raises:
            BudgetError: (a ``ValueError``) with ``over_budget="raise"``, when the
                budget cannot be met; it names the sizes.
        """
        items, report = self._start(messages, reserved_tokens, threshold)
        plan = self._plan_within(items, report, carried_summary, reserved_tokens, over_budget)
        condenser, memory = self.condenser, self.summary_memory

        def answer(request: _Request) -> Reply:
            if isinstance(request, SummaryRequest):
                return None if condenser is None else condenser._answer(request)
            return None if memory is None else memory.answer(request)

        return drive(plan, answer)

    async def acompress(
        self,
        messages: Any,
        *,
        carried_summary: CarriedSummary | None = None,
        reserved_tokens: int = 0,
        threshold: int | None = None,
        over_budget: OverBudget = "raise",
    ) -> CompressionResult:
        """Async :meth:`compress`: only the summarizer call differs."""
        items, report = self._start(messages, reserved_tokens, threshold)
        plan = self._plan_within(items, report, carried_summary, reserved_tokens, over_budget)
        condenser, memory = self.condenser, self.summary_memory

        async def answer(request: _Request) -> Reply:
            if isinstance(request, SummaryRequest):
                return None if condenser is None else await condenser._aanswer(request)
            return None if memory is None else await memory.aanswer(request)

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
