"""The Condenser: one LLM summary replaces the middle turns.

The head (the task) and the tail (the newest turns within ``tail_budget``) stay
verbatim; the middle becomes one message that starts with :data:`CONDENSED_TAG`
and is marked as the pipeline's own in ``response_metadata``. A prior pipeline
summary in the middle is merged into the new one. When the model fails in any
way, a deterministic digest of the middle stands in and nothing of the error
reaches the history.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_context_pipeline._breaker import CircuitBreaker
from langchain_context_pipeline._checks import check_int
from langchain_context_pipeline._model_call import (
    Plan,
    Reply,
    SummaryModel,
    SummaryRequest,
    acall_model,
    adrive,
    call_model,
    drive,
)
from langchain_context_pipeline._prompt import DEFAULT_INSTRUCTIONS, build_prompt
from langchain_context_pipeline._runnable import MessagesRunnable
from langchain_context_pipeline._trim import cut_end
from langchain_context_pipeline._units import (
    METADATA_KEY,
    Meter,
    Split,
    group_units,
    head_end,
    is_system,
    pipeline_kind,
    split,
)
from langchain_context_pipeline.briefs import ToolBrief
from langchain_context_pipeline.digest import build_digest, build_index
from langchain_context_pipeline.tokens import message_text, resolve_token_counter

__all__ = ["CONDENSED_TAG", "DIGEST", "CondenseStats", "Condenser", "is_pipeline_summary"]

logger = logging.getLogger("langchain_context_pipeline")

CONDENSED_TAG = "[CONTEXT CONDENSED — REFERENCE ONLY]"
"""The first line of every summary the pipeline writes."""

DIGEST = "digest"
"""Pass as ``model`` to condense with the deterministic digest and no LLM."""


def is_pipeline_summary(message: Any) -> bool:
    """Return whether ``message`` is a summary this pipeline wrote.

    Only the pipeline's metadata mark counts: a message that merely starts with
    :data:`CONDENSED_TAG` is ordinary content.
    """
    return isinstance(message, BaseMessage) and pipeline_kind(message) == "summary"


def summary_text(message: BaseMessage) -> str:
    """Return a pipeline summary's text without its tag line."""
    text = message_text(message)
    return text[len(CONDENSED_TAG) :].lstrip("\n") if text.startswith(CONDENSED_TAG) else text


@dataclass
class CondenseStats:
    """What one condensing pass did."""

    condensed: int = 0
    """Messages replaced by the summary (a merged prior summary included)."""
    summariser_calls: int = 0
    """Calls made to the summariser."""
    summariser_failures: int = 0
    """Calls whose reply was unusable; the digest stood in."""
    source: str | None = None
    """``"model"`` or ``"digest"``: who wrote the summary, if one was written."""
    failure: str | None = None
    """Why the last summariser call was rejected, if it was."""
    summariser_skipped: int = 0
    """Summaries the digest wrote because the circuit breaker was open."""
    breaker_opened: bool = False
    """Whether this pass's failure opened the circuit breaker."""


def _reply_text(reply: Reply) -> tuple[str | None, str | None]:
    """Return (text, None) for a usable reply, else (None, why it is unusable)."""
    if isinstance(reply, BaseException):
        return None, f"{type(reply).__name__}: {reply}"
    if reply is None:
        return None, "the summariser returned None"
    if isinstance(reply, BaseMessage):
        text = message_text(reply)
        if not text.strip() and not isinstance(reply.content, str):
            return None, "the summariser returned no text blocks"
    elif isinstance(reply, str):
        text = reply
    else:
        return None, f"the summariser returned {type(reply).__name__}, not text or a message"
    text = text.strip()
    if text.startswith(CONDENSED_TAG):
        text = text[len(CONDENSED_TAG) :].strip()
    if not text:
        return None, "the summariser returned empty text"
    return text, None


class Condenser(MessagesRunnable):
    """Replace the middle of a conversation with one summary written by a model.

    A Runnable over ``list[BaseMessage]``: the output is the head, the middle's
    system messages, one summary message, and the tail.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("They said hi.")]))
        >>> history = [HumanMessage("task")] + [HumanMessage("hi " * 900)] * 3
        >>> out = Condenser(model, head_count=1, tail_budget=700).invoke(history)
        >>> [m.content[:36] for m in out][:2]
        ['task', '[CONTEXT CONDENSED — REFERENCE ONLY]']
    """

    name: str = "Condenser"

    def __init__(
        self,
        model: SummaryModel | str | None,
        *,
        head_count: int = 2,
        tail_budget: int = 8000,
        summary_ratio: float = 0.2,
        min_summary_tokens: int = 500,
        max_summary_tokens: int = 4000,
        prompt: str | None = None,
        token_counter: Any = None,
        briefs: Mapping[str, ToolBrief] | None = None,
        summary_timeout: float | None = 60.0,
        failure_limit: int = 3,
        cooldown_calls: int = 10,
    ) -> None:
        """Configure the Condenser.

        Args:
            model: a ``BaseChatModel``, a Runnable or a callable taking the prompt
                messages and returning text or a message; ``None`` or
                :data:`DIGEST` condenses with the deterministic digest only.
            head_count: the first N messages kept verbatim (the task).
            tail_budget: tokens of newest messages kept verbatim.
            summary_ratio: the summary's target size as a share of the middle's tokens.
            min_summary_tokens: the smallest target size.
            max_summary_tokens: the largest target size.
            prompt: instructions replacing the default; may use ``{max_tokens}``.
            token_counter: how tokens are counted (default: the estimate).
            briefs: brief builders for your tools, used by the digest.
            summary_timeout: seconds to wait for the summariser (``None``: forever).
            failure_limit: after this many failed summaries in a row, the summariser
                is not called for ``cooldown_calls`` condensations (0: never stop).
            cooldown_calls: condensations served by the digest while the breaker is open.

        Raises:
            ValueError: for inconsistent sizes or a prompt that cannot be formatted.
            TypeError: when ``model`` is not a model, Runnable or callable.
        """
        if isinstance(model, str) and model != DIGEST:
            raise ValueError(f"model: the only name accepted is {DIGEST!r}, got {model!r}")
        if not (model is None or isinstance(model, str | Runnable) or callable(model)):
            raise TypeError(
                "model must be a BaseChatModel, a Runnable, a callable, 'digest' or None, "
                f"got {type(model).__name__}"
            )
        for name, value in (
            ("head_count", head_count),
            ("tail_budget", tail_budget),
            ("min_summary_tokens", min_summary_tokens),
            ("max_summary_tokens", max_summary_tokens),
            ("failure_limit", failure_limit),
            ("cooldown_calls", cooldown_calls),
        ):
            check_int(name, value)
        if not 0 < summary_ratio <= 1:
            raise ValueError(f"summary_ratio must be in (0, 1], got {summary_ratio!r}")
        if min_summary_tokens < 1 or min_summary_tokens > max_summary_tokens:
            raise ValueError(
                "need 1 <= min_summary_tokens <= max_summary_tokens, got "
                f"{min_summary_tokens} and {max_summary_tokens}"
            )
        if summary_timeout is not None and summary_timeout <= 0:
            raise ValueError(f"summary_timeout must be positive or None, got {summary_timeout!r}")
        instructions = DEFAULT_INSTRUCTIONS if prompt is None else prompt
        try:
            instructions.format(max_tokens=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"prompt must be a str.format template using only {{max_tokens}}: {exc!r}"
            ) from exc
        self.model: SummaryModel | None = None if isinstance(model, str) else model
        self.head_count = head_count
        self.tail_budget = tail_budget
        self.summary_ratio = summary_ratio
        self.min_summary_tokens = min_summary_tokens
        self.max_summary_tokens = max_summary_tokens
        self.instructions = instructions
        self.token_counter = resolve_token_counter(token_counter)
        self.briefs = dict(briefs or {})
        self.summary_timeout = summary_timeout
        self.breaker = CircuitBreaker(failure_limit, cooldown_calls)

    # -- planning (shared by sync and async) ---------------------------------------

    def summary_budget(self, middle_tokens: int) -> int:
        """Return the summary's target tokens for a middle of ``middle_tokens``."""
        target = round(self.summary_ratio * middle_tokens)
        return max(self.min_summary_tokens, min(self.max_summary_tokens, target))

    def plan(
        self,
        messages: Sequence[BaseMessage],
        meter: Meter,
        stats: CondenseStats,
        *,
        tail_from: int | None = None,
    ) -> Plan[list[BaseMessage]]:
        """Plan the condensed list, yielding a request when the summariser is needed.

        Returns the new list, or a copy of ``messages`` when there is no middle
        worth condensing. ``tail_from`` fixes where the tail starts (the pipeline
        passes the Pruner's boundary, so the tail it keeps is the unpruned one and
        the next turn's prefix is the same); by default ``tail_budget`` decides.
        """
        if tail_from is None:
            _, where = split(
                messages, head_count=self.head_count, tail_budget=self.tail_budget, meter=meter
            )
        else:
            end = head_end(messages, group_units(messages), self.head_count)
            where = Split(end, max(tail_from, end))
        middle = messages[where.head_end : where.tail_start]
        kept_system = [m for m in middle if is_system(m)]
        replaced = [m for m in middle if not is_system(m)]
        replaced_tokens = sum(meter.one(m) for m in replaced)
        if not replaced or replaced_tokens <= self.min_summary_tokens:
            return list(messages)
        priors = [m for m in replaced if is_pipeline_summary(m)]
        previous = "\n\n".join(summary_text(m) for m in priors) or None
        body = [m for m in replaced if not is_pipeline_summary(m)]
        budget = min(self.summary_budget(replaced_tokens), replaced_tokens - 1)

        text: str | None = None
        if self.model is not None and not self.breaker.allow():
            stats.summariser_skipped += 1
            logger.warning("summariser circuit breaker open; using the deterministic digest")
        elif self.model is not None:
            stats.summariser_calls += 1
            reply = yield SummaryRequest(
                build_prompt(body, previous, budget, self.instructions), budget
            )
            text, failure = _reply_text(reply)
            if text is not None and meter.one(HumanMessage(text)) >= replaced_tokens:
                text, failure = None, "the summary is not smaller than what it replaces"
            if text is not None:
                # An index of the turns takes what the summary leaves of its budget,
                # and at least a quarter of it: paths, commands and requests stay
                # findable whatever the model wrote.
                room = budget * 4 - len(CONDENSED_TAG) - 8
                index = build_index(body, max(room - len(text), room // 4))
                if index:
                    text = f"{cut_end(text, room - len(index) - 2)}\n\n{index}"
                summary = self._summary_message(text, replaced, budget, meter, "model")
            stats.breaker_opened = self.breaker.record(text is not None)
            if text is None:
                stats.summariser_failures += 1
                stats.failure = failure
                logger.warning("summariser failed (%s); using the deterministic digest", failure)
        if text is None:
            digest = build_digest(body, previous, budget * 4, briefs=self.briefs)
            summary = self._summary_message(digest, replaced, budget, meter, "digest")
        stats.condensed += len(replaced)
        stats.source = pipeline_source(summary)
        head = list(messages[: where.head_end])
        return [*head, *kept_system, summary, *messages[where.tail_start :]]

    def _summary_message(
        self,
        text: str,
        replaced: Sequence[BaseMessage],
        budget: int,
        meter: Meter,
        source: str,
    ) -> HumanMessage:
        """Build the summary message, cut so it counts at most ``budget`` tokens."""
        through = next((m.id for m in reversed(replaced) if m.id), None)
        key = hashlib.sha256()
        for m in replaced:
            key.update((m.id or message_text(m)).encode("utf-8", "surrogatepass"))
        key.update(text.encode("utf-8", "surrogatepass"))
        meta = {
            METADATA_KEY: {
                "kind": "summary",
                "source": source,
                "covered": len(replaced),
                "through": through,
            }
        }
        chars = max(budget, 1) * 4
        while True:
            content = f"{CONDENSED_TAG}\n{cut_end(text, chars)}" if chars > 0 else CONDENSED_TAG
            message = HumanMessage(
                content=content,
                id=f"context-summary-{key.hexdigest()[:20]}",
                response_metadata=meta,
            )
            if chars <= 0 or meter.one(message) <= budget:
                return message
            chars = chars * 4 // 5 - 1

    # -- sync and async shells ------------------------------------------------------

    def _answer(self, request: SummaryRequest) -> Reply:
        assert self.model is not None  # the planner asks only when there is a model
        return call_model(self.model, request, self.summary_timeout)

    async def _aanswer(self, request: SummaryRequest) -> Reply:
        assert self.model is not None
        return await acall_model(self.model, request, self.summary_timeout)

    def condense(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], CondenseStats]:
        """Condense ``messages``; return the new list and what was done."""
        stats = CondenseStats()
        out = drive(self.plan(messages, Meter(self.token_counter), stats), self._answer)
        return out, stats

    async def acondense(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[list[BaseMessage], CondenseStats]:
        """Async :meth:`condense`: only the summariser call differs."""
        stats = CondenseStats()
        out = await adrive(self.plan(messages, Meter(self.token_counter), stats), self._aanswer)
        return out, stats

    def _transform(self, messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        return self.condense(messages)[0]

    async def _atransform(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> list[BaseMessage]:
        return (await self.acondense(messages))[0]


def pipeline_source(message: BaseMessage) -> str | None:
    """Return who wrote a pipeline summary (``"model"`` or ``"digest"``), if known."""
    meta = message.response_metadata.get(METADATA_KEY)
    source = meta.get("source") if isinstance(meta, dict) else None
    return source if isinstance(source, str) else None
