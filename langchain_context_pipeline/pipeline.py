"""ContextPipeline: keep every model call under a token budget, cheapest way first.

1. estimate: at or under ``threshold``, the input list itself comes back untouched;
2. prune: free, mechanical trimming of old, bulky content;
3. condense: one summary of the middle turns (an LLM, or the deterministic digest);
4. truncate: drop middle units and cut what must be kept, so the budget holds.

One planner serves every entry point (LCEL, the LangGraph hook, the agent
middleware, the command line); its sync and async shells differ only in how the
summariser is called.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from langchain_context_pipeline._checks import check_int
from langchain_context_pipeline._model_call import Plan, adrive, drive
from langchain_context_pipeline._runnable import MessagesRunnable
from langchain_context_pipeline._units import (
    METADATA_KEY,
    Meter,
    coerce_messages,
    group_units,
    head_end,
    is_system,
    tail_start,
)
from langchain_context_pipeline.briefs import ToolBrief
from langchain_context_pipeline.condenser import (
    Condenser,
    CondenseStats,
    is_pipeline_summary,
)
from langchain_context_pipeline.pruner import Pruner
from langchain_context_pipeline.tokens import (
    estimate_message_tokens,
    message_text,
    resolve_token_counter,
)
from langchain_context_pipeline.truncate import truncate

__all__ = ["CompressionReport", "CompressionResult", "ContextPipeline", "RunningSummary"]

logger = logging.getLogger("langchain_context_pipeline")


@dataclass
class CompressionReport:
    """What one pass of the pipeline did, stage by stage."""

    threshold: int
    """The budget, in tokens."""
    tokens_before: int
    """Tokens of the input."""
    tokens_after: int = 0
    """Tokens of the output."""
    tokens_after_prune: int | None = None
    """Tokens after pruning, if the Pruner ran."""
    tokens_after_condense: int | None = None
    """Tokens after condensing, if the Condenser ran."""
    tokens_after_truncate: int | None = None
    """Tokens after hard truncation, if it ran."""
    stages: list[str] = field(default_factory=list)
    """The stages that ran, in order: ``prune``, ``condense``, ``truncate``."""
    summary_reused: bool = False
    """Whether a running summary from an earlier turn replaced the turns it covers."""
    briefed: int = 0
    """Tool results replaced by a one-line brief."""
    args_trimmed: int = 0
    """AI messages whose tool-call arguments were cut."""
    texts_trimmed: int = 0
    """AI messages whose long text was cut to its head and tail."""
    condensed: int = 0
    """Messages replaced by the summary."""
    dropped: int = 0
    """Messages removed by hard truncation."""
    cut: int = 0
    """Kept messages cut in the middle by hard truncation."""
    summariser_calls: int = 0
    """Calls made to the summariser."""
    summariser_failures: int = 0
    """Summariser calls whose reply was unusable (the digest stood in)."""
    summary_source: str | None = None
    """``"model"`` or ``"digest"`` when this pass wrote a summary."""
    failure: str | None = None
    """Why the summariser's reply was rejected, when it was."""
    summariser_skipped: int = 0
    """Summaries the digest wrote without a call because the circuit breaker was open."""
    breaker_open: bool = False
    """Whether the summariser's circuit breaker is open after this pass."""

    def as_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class RunningSummary:
    """A summary carried between turns, so the summariser is not called every turn.

    Stored in graph state as :meth:`to_dict`; the next pass puts the summary in
    place of the turns it covers and calls the summariser again only when what
    is left no longer fits.
    """

    message: BaseMessage
    """The pipeline's summary message."""
    through: str
    """The id of the last message the summary covers."""

    @property
    def text(self) -> str:
        """The summary's text (with its tag)."""
        return message_text(self.message)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict for a state key or a checkpoint.

        ``tokens`` (the summary's size by the default estimate) is for readers of
        the state; :meth:`from_dict` does not need it.
        """
        meta = self.message.response_metadata.get(METADATA_KEY, {})
        return {
            "id": self.message.id,
            "text": self.text,
            "through": self.through,
            "tokens": estimate_message_tokens(self.message),
            "meta": dict(meta) if isinstance(meta, Mapping) else {},
        }

    @classmethod
    def from_state(cls, value: Any, key: str) -> RunningSummary | None:
        """Read a running summary stored in graph state under ``key``.

        Accepts what :meth:`to_dict` wrote (or a ``RunningSummary``); anything else,
        a damaged value included, is ignored with a warning: the next pass then
        works without it, which costs a summary but loses nothing.
        """
        if value is None or isinstance(value, RunningSummary):
            return value
        if isinstance(value, Mapping):
            try:
                return cls.from_dict(value)
            except ValueError as exc:
                logger.warning("ignoring state[%r]: %s", key, exc)
                return None
        logger.warning("ignoring state[%r]: not a running summary (%s)", key, type(value).__name__)
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunningSummary:
        """Rebuild from :meth:`to_dict` output.

        Raises:
            ValueError: when ``data`` lacks the keys ``to_dict`` writes.
        """
        try:
            meta = {**data["meta"], "kind": "summary"}
            message = HumanMessage(
                content=str(data["text"]), id=data["id"], response_metadata={METADATA_KEY: meta}
            )
            return cls(message=message, through=str(data["through"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a running summary: missing {exc}") from exc

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> RunningSummary | None:
        """Return the running summary a compressed list carries, if any."""
        for message in messages:
            if is_pipeline_summary(message):
                meta = message.response_metadata[METADATA_KEY]
                through = meta.get("through")
                if isinstance(through, str):
                    return cls(message=message, through=through)
        return None


@dataclass
class CompressionResult:
    """The output of :meth:`ContextPipeline.compress`."""

    messages: list[BaseMessage]
    """The messages to send to the model."""
    report: CompressionReport
    """What each stage did."""
    running_summary: RunningSummary | None = None
    """The summary to carry to the next turn (new, reused, or None)."""


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
        '[bash] "pytest" -> 600 lines output; last: FAILED test_x'
        >>> result.report.stages, result.report.tokens_after <= 1000
        (['prune'], True)
    """

    name: str = "ContextPipeline"

    def __init__(
        self,
        *,
        threshold: int = 32000,
        tail_budget: int | None = None,
        head_count: int = 2,
        model: Any = None,
        token_counter: Any = None,
        tool_output_limit: int = 500,
        tool_args_limit: int = 200,
        assistant_text_limit: int = 2000,
        assistant_keep_head: int = 800,
        assistant_keep_tail: int = 400,
        briefs: Mapping[str, ToolBrief] | None = None,
        summary_ratio: float = 0.2,
        min_summary_tokens: int = 500,
        max_summary_tokens: int = 4000,
        prompt: str | None = None,
        summary_timeout: float | None = 60.0,
        failure_limit: int = 3,
        cooldown_calls: int = 10,
    ) -> None:
        """Configure the pipeline.

        Args:
            threshold: compress only above this many tokens; the output is always at
                or under it.
            tail_budget: tokens of newest messages kept verbatim by prune and condense
                (default: ``min(8000, threshold // 4)``, so 8000 at the default threshold).
            head_count: the first N messages (the task) kept verbatim.
            model: the summariser: a ``BaseChatModel``, Runnable or callable;
                ``"digest"`` for the deterministic digest; ``None`` to skip
                condensing (hard truncation follows pruning).
            token_counter: ``None``/``"estimate"``, ``"approximate"``, ``"tiktoken"``,
                a ``BaseChatModel`` or a callable over a list of messages.
            tool_output_limit: see :class:`Pruner`.
            tool_args_limit: see :class:`Pruner`.
            assistant_text_limit: see :class:`Pruner`.
            assistant_keep_head: see :class:`Pruner`.
            assistant_keep_tail: see :class:`Pruner`.
            briefs: ``{tool_name: fn(name, args, output) -> str}`` for your own tools.
            summary_ratio: see :class:`Condenser`.
            min_summary_tokens: see :class:`Condenser`.
            max_summary_tokens: see :class:`Condenser`.
            prompt: see :class:`Condenser`.
            summary_timeout: see :class:`Condenser`.
            failure_limit: see :class:`Condenser` (the summariser's circuit breaker).
            cooldown_calls: see :class:`Condenser`.

        Raises:
            ValueError: for inconsistent settings, e.g. ``tail_budget >= threshold``.
        """
        check_int("threshold", threshold, 1)
        if tail_budget is None:
            tail_budget = min(8000, threshold // 4) if isinstance(threshold, int) else 8000
        check_int("tail_budget", tail_budget, 0)
        check_int("head_count", head_count, 0)
        if tail_budget >= threshold:
            raise ValueError(
                f"tail_budget ({tail_budget}) must be smaller than threshold ({threshold})"
            )
        self.threshold = threshold
        self.tail_budget = tail_budget
        self.head_count = head_count
        self.token_counter = resolve_token_counter(token_counter)
        self.pruner = Pruner(
            tail_budget=tail_budget,
            tool_output_limit=tool_output_limit,
            tool_args_limit=tool_args_limit,
            assistant_text_limit=assistant_text_limit,
            assistant_keep_head=assistant_keep_head,
            assistant_keep_tail=assistant_keep_tail,
            briefs=briefs,
            token_counter=self.token_counter,
        )
        self.condenser: Condenser | None = None
        if model is not None:
            self.condenser = Condenser(
                model,
                head_count=head_count,
                tail_budget=tail_budget,
                summary_ratio=summary_ratio,
                min_summary_tokens=min_summary_tokens,
                max_summary_tokens=max_summary_tokens,
                prompt=prompt,
                token_counter=self.token_counter,
                briefs=briefs,
                summary_timeout=summary_timeout,
                failure_limit=failure_limit,
                cooldown_calls=cooldown_calls,
            )

    @property
    def model(self) -> Any:
        """The summariser, or ``None``."""
        return None if self.condenser is None else self.condenser.model

    # -- the one planner --------------------------------------------------------------

    def _covered(
        self, messages: list[BaseMessage], running: RunningSummary | None
    ) -> tuple[int, int] | None:
        """Return the span ``[start, stop)`` a running summary stands for, if it applies.

        It applies when the message it covers through is there, after the head, and
        ends a unit (so putting the summary in its place orphans nothing).
        """
        if running is None:
            return None
        through = next((i for i, m in enumerate(messages) if m.id == running.through), None)
        if through is None:
            return None
        units = group_units(messages)
        start = head_end(messages, units, self.head_count)
        if through < start or (through + 1) not in {end for _, end in units}:
            return None
        return start, through + 1

    def _limits(self, reserved: int) -> tuple[int, int]:
        """Return this call's (budget, tail budget) once ``reserved`` tokens are set aside."""
        check_int("reserved_tokens", reserved)
        limit = self.threshold - reserved
        if limit < 1:
            raise ValueError(
                f"reserved_tokens ({reserved}) leave nothing of threshold {self.threshold} "
                "for the messages"
            )
        tail = self.tail_budget
        if tail >= limit:
            tail = limit // 2
            logger.warning(
                "reserved_tokens %d leave %d tokens: tail_budget %d cut to %d for this call",
                reserved,
                limit,
                self.tail_budget,
                tail,
            )
        return limit, tail

    def _summary_fits(
        self,
        messages: list[BaseMessage],
        units: list[tuple[int, int]],
        head: int,
        limit: int,
        meter: Meter,
    ) -> bool:
        """Whether a summary could sit beside what truncation must keep.

        When the head, the system messages and the last unit fill the budget by
        themselves, truncation would drop any summary: the call is not made.
        """
        assert self.condenser is not None
        last = units[-1][0] if units else len(messages)
        must = sum(
            meter.one(m) for i, m in enumerate(messages) if i < head or i >= last or is_system(m)
        )
        return must + self.condenser.min_summary_tokens <= limit

    def plan(
        self,
        messages: list[BaseMessage],
        report: CompressionReport,
        running: RunningSummary | None = None,
        reserved: int = 0,
    ) -> Plan[CompressionResult]:
        """Plan the compressed list; yields a request when the summariser is needed."""
        limit, tail = self._limits(reserved)
        report.threshold = limit
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
        covered = self._covered(messages, running)
        if covered is not None and running is not None:
            start, stop = covered
            work = [*messages[:start], running.message, *messages[stop:]]
            report.summary_reused = True
            if counts is not None:  # the counts just taken serve the new list too
                summary = estimate_message_tokens(running.message)
                tokens = sum(counts[:start]) + summary + sum(counts[stop:])
            else:
                tokens = meter.total(work)
        if tokens <= limit:
            report.tokens_after = tokens
            return CompressionResult(work, report, running if report.summary_reused else None)
        if counts is not None:
            meter.seed(messages, counts)

        units = group_units(work)
        head = head_end(work, units, self.head_count)
        tail_from = tail_start(work, units, tail, meter, floor=head)
        before_prune = work
        work, prune_stats = self.pruner.prune(work, tail_from, head)
        report.stages.append("prune")
        report.briefed = prune_stats.briefed
        report.args_trimmed = prune_stats.args_trimmed
        report.texts_trimmed = prune_stats.texts_trimmed
        if meter.additive:  # only the messages the Pruner replaced are counted again
            tokens += sum(
                meter.one(new) - meter.one(old)
                for new, old in zip(work, before_prune, strict=True)
                if new is not old
            )
        else:
            tokens = meter.total(work)
        report.tokens_after_prune = tokens

        if (
            tokens > limit
            and self.condenser is not None
            and self._summary_fits(work, units, head, limit, meter)
        ):
            stats = CondenseStats()
            work = yield from self.condenser.plan(work, meter, stats, tail_from=tail_from)
            report.stages.append("condense")
            report.condensed = stats.condensed
            report.summariser_calls = stats.summariser_calls
            report.summariser_failures = stats.summariser_failures
            report.summary_source = stats.source
            report.failure = stats.failure
            report.summariser_skipped = stats.summariser_skipped
            report.breaker_open = self.condenser.breaker.is_open
            tokens = report.tokens_after_condense = meter.total(work)

        if tokens > limit:
            work, cut_stats = truncate(work, limit, self.head_count, meter)
            report.stages.append("truncate")
            report.dropped = cut_stats.dropped
            report.cut = cut_stats.cut
            tokens = report.tokens_after_truncate = meter.total(work)
        report.tokens_after = tokens
        carried = RunningSummary.of(work)
        if carried is None and report.summary_reused and running is not None:
            carried = running if any(m is running.message for m in work) else None
        return CompressionResult(work, report, carried)

    def _start(
        self, messages: Any, running: RunningSummary | None
    ) -> tuple[list[BaseMessage], CompressionReport]:
        return coerce_messages(messages), CompressionReport(self.threshold, tokens_before=0)

    # -- sync and async shells --------------------------------------------------------

    def compress(
        self,
        messages: Any,
        *,
        running_summary: RunningSummary | None = None,
        reserved_tokens: int = 0,
    ) -> CompressionResult:
        """Compress ``messages``; return the new list, the report and the running summary.

        Args:
            messages: the conversation (messages, OpenAI-style dicts or a PromptValue).
            running_summary: a summary carried from an earlier turn (see the hook).
            reserved_tokens: tokens of the same request spent elsewhere (a system
                prompt or tool schemas sent beside the messages): the messages get
                ``threshold - reserved_tokens``.

        Raises:
            ValueError: when ``reserved_tokens`` leave no room for the messages.
        """
        items, report = self._start(messages, running_summary)
        plan = self.plan(items, report, running_summary, reserved_tokens)
        if self.condenser is None:
            return drive(plan, lambda request: None)
        return drive(plan, self.condenser._answer)

    async def acompress(
        self,
        messages: Any,
        *,
        running_summary: RunningSummary | None = None,
        reserved_tokens: int = 0,
    ) -> CompressionResult:
        """Async :meth:`compress`: only the summariser call differs."""
        items, report = self._start(messages, running_summary)
        plan = self.plan(items, report, running_summary, reserved_tokens)
        if self.condenser is None:
            return drive(plan, lambda request: None)
        return await adrive(plan, self.condenser._aanswer)

    def _transform(self, messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        return self.compress(messages).messages

    async def _atransform(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> list[BaseMessage]:
        return (await self.acompress(messages)).messages
