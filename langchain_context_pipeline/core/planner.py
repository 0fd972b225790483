"""The one planner behind :class:`~langchain_context_pipeline.core.pipeline.ContextPipeline`.

A pass is planned as a sans-IO generator: it yields a request when the summarizer
(or the summary memory's store) is needed and is sent the reply; the pipeline's
sync and async shells (:meth:`ContextPipeline.compress`, :meth:`~ContextPipeline.acompress`)
differ only in how they answer. :class:`PassPlanner` holds the planning; the
pipeline adds its configuration, its Runnable face and the drivers.

One pass prunes once: the hysteresis replay prices every prune boundary from the
list pruned up to the tail, and the pass keeps that pruning up to the boundary it
settles on (see :meth:`~langchain_context_pipeline.stages.pruner.Pruner.prune_each`);
a summary, when one is needed, takes the place of what the replay would truncate.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import replace
from typing import Literal

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.core.recalled import recall_summary, remember_summary
from langchain_context_pipeline.core.report import CompressionReport, CompressionResult
from langchain_context_pipeline.errors import BudgetError, check_int
from langchain_context_pipeline.messages.cache_hint import PrefixWatch
from langchain_context_pipeline.messages.units import Split, head_end
from langchain_context_pipeline.stages.breaker import conversation_key
from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.condenser import Condenser
from langchain_context_pipeline.stages.hysteresis import StandingCuts, prune_at_cuts
from langchain_context_pipeline.stages.model_call import Reply, SummaryRequest
from langchain_context_pipeline.stages.pruner import Pruner
from langchain_context_pipeline.stages.settings import PipelineSettings
from langchain_context_pipeline.stages.stats import CondenseStats
from langchain_context_pipeline.stages.summary_memory import (
    Prefixes,
    StoreRead,
    StoreWrite,
    SummaryMemory,
)
from langchain_context_pipeline.stages.truncate import (
    minimal_request,
    note_room,
    truncate,
)
from langchain_context_pipeline.tokens.counters import TokenCounter, estimate_message_tokens
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["OverBudget", "PassPlanner", "PlanRequest"]

logger = logging.getLogger("langchain_context_pipeline")

PlanRequest = SummaryRequest | StoreRead | StoreWrite
"""What a plan yields: a summary to write, a store to read or to write."""

OverBudget = Literal["raise", "minimal"]
"""What :meth:`ContextPipeline.compress` does when the budget cannot be met: raise
:class:`BudgetError`, or return the smallest valid request with a warning."""


class PassPlanner:
    """Plan one pass of the pipeline: estimate, prune, condense, truncate.

    The attributes are set by :class:`ContextPipeline`'s constructor.
    """

    settings: PipelineSettings
    token_counter: TokenCounter
    pruner: Pruner
    condenser: Condenser | None
    summary_memory: SummaryMemory | None
    _prefixes: PrefixWatch

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

    def plan(
        self,
        messages: list[BaseMessage],
        report: CompressionReport,
        carried: CarriedSummary | None = None,
        standing: StandingCuts | None = None,
    ) -> Generator[PlanRequest, Reply, CompressionResult]:
        """Plan the compressed list; yields a request when the summarizer (or store) is needed.

        ``report`` comes in with the threshold and the reserved tokens; the plan
        fills in the rest. ``standing``: where the conversation's previous request
        had its cuts (see :class:`StandingCuts`).
        """
        limit, tail = self._limits(report.threshold, report.reserved)
        report.limit = limit
        report.cuts = StandingCuts()  # nothing cut, unless the hysteresis cuts below
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
        where = given = Split.of(messages, self.settings.head_count)
        covered = self._covered(messages, where, carried)
        carried_in = covered is not None  # the caller's summary (graph state), not recalled
        has_model = self.condenser is not None and self.condenser.model is not None
        memory = self.summary_memory if has_model else None
        prefixes = Prefixes(messages)
        replay = False
        if covered is None and memory is not None and tokens > limit:
            recalled = yield from recall_summary(memory, prefixes, where)
            if recalled is not None:
                covered, carried = (where.head_end, recalled.stop), recalled.summary
                replay = recalled.replay
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

        if replay:
            # The pass that wrote this summary was given this very list and truncated
            # it after the summary: the same truncation gives its output again, where
            # pruning and condensing anew would pay for a second summary.
            assert covered is not None  # a recalled summary stands in for its turns
            tail_ids = {id(m) for m in messages[covered[1] :]}
            where = Split.of(work, self.settings.head_count)
            work, report.truncate = truncate(work, where, limit, meter)
            report.stages.append("truncate")
            tokens = report.truncate.tokens_after = meter.total(work)
            return self._finish(messages, work, report, meter, tokens, tail_ids, carried)

        before_prune = work
        # Hysteresis: the prune boundary and the truncation cut move only when the
        # request would overflow with them as they stand (starting from the cuts of
        # the conversation's last request, when given); then the oldest units are
        # pruned down to the low-water mark (see ``stages.hysteresis``). What fits
        # once pruned is sent as it is. Without a summarizer, truncation brings the
        # request down to the mark only if pruning all older than the tail is not
        # enough (``first``: where it cuts, None for no cut); with one, a summary
        # takes the place of what truncation would drop (a summary costs a model call
        # and its own tokens, so it is not spent while pruning is enough).
        base = substituted_end if report.summary_reused else where.head_end
        work, report.prune, where, first, cuts, note_index = prune_at_cuts(
            self.pruner, work, where, base, limit, self._low_water(limit), tail, meter, standing
        )
        # With a summarizer only the prune cut is carried: a summary, not a standing
        # drop, takes the place of what truncation would cut.
        report.cuts = cuts if self.condenser is None else StandingCuts(cuts.pruned_through)
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
            if (tokens > limit or first is not None) and self.condenser is not None
            else None
        )
        if room is not None and carried_in and memory is not None:
            # The summary carried in may be older than one the memory holds for a
            # longer span of this very list (a model call retried with the state it
            # had, a run replayed from an earlier checkpoint): that summary stands
            # rather than a second one paid for the same turns.
            recalled = yield from recall_summary(memory, prefixes, given)
            if recalled is not None and covered is not None and recalled.stop > covered[1]:
                again = CompressionReport(report.threshold, report.limit, reserved=report.reserved)
                return (yield from self.plan(messages, again, None, standing))
        if room is not None and self.condenser is not None:
            report.condense = CondenseStats()
            work = yield from self.condenser.plan(work, where, meter, report.condense, room)
            first = note_index = None  # the summary stands where truncation would cut
            report.cuts = StandingCuts()  # what was pruned is in the summary
            if memory is not None and where.tail_start >= substituted_end:
                condensed = (work, where)
            report.stages.append("condense")
            report.breaker_open = report.condense.breaker_open
            tokens = report.condense.tokens_after = meter.total(work)
            where = Split.of(work, self.settings.head_count)

        if tokens > limit or first is not None:
            work, report.truncate = truncate(
                work, where, limit, meter, first=first, index_chars=note_index
            )
            if report.cuts is not None and report.cuts.dropped_through is not None:
                report.cuts = replace(report.cuts, note_index=report.truncate.note_index)
            report.stages.append("truncate")
            tokens = report.truncate.tokens_after = meter.total(work)
        if condensed is not None and memory is not None:
            # Remembered only when the output keeps it: a summary that truncation
            # dropped is not carried, so recalling it later would differ from a
            # fresh pipeline given the same carried summary.
            yield from remember_summary(
                memory, prefixes, *condensed, shift, report, kept=work, size=len(messages)
            )
        return self._finish(messages, work, report, meter, tokens, tail_ids, carried)

    def _finish(
        self,
        messages: list[BaseMessage],
        work: list[BaseMessage],
        report: CompressionReport,
        meter: Meter,
        tokens: int,
        tail_ids: set[int],
        carried: CarriedSummary | None,
    ) -> CompressionResult:
        """Close a pass that compressed: ``work`` is the output; ``tail_ids``, the tail's."""
        report.tokens_after = tokens
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
        over_budget: OverBudget,
        standing: StandingCuts | None = None,
    ) -> Generator[PlanRequest, Reply, CompressionResult]:
        """Run :meth:`plan`, or give the smallest valid request for a budget it cannot meet.

        Only with ``over_budget="minimal"``; otherwise :class:`BudgetError` is raised.
        """
        try:
            return (yield from self.plan(messages, report, carried, standing))
        except BudgetError as error:
            if over_budget != "minimal":
                raise
            return self._minimal(messages, report.threshold, report.reserved, carried, error)

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
        report = CompressionReport(
            threshold, limit=limit, tokens_before=meter.total(messages), reserved=reserved
        )
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
