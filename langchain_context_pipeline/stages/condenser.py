"""The Condenser: one LLM summary replaces the middle turns.

The head (the task) and the tail (the newest turns within ``tail_budget``) stay
verbatim; the middle becomes one message that starts with :data:`CONDENSED_TAG`
and is marked as the pipeline's own in ``response_metadata``. A prior pipeline
summary in the middle is merged into the new one. When the model fails in any
way (or its prompt cannot be built), a deterministic digest of the middle stands
in and nothing of the error reaches the history.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import coerce_to_runnable

from langchain_context_pipeline.errors import check_int
from langchain_context_pipeline.messages.anatomy import one_pass
from langchain_context_pipeline.messages.marks import (
    CONDENSED_TAG,
    is_pipeline_summary,
    pipeline_mark,
    pipeline_source,
    summary_text,
)
from langchain_context_pipeline.messages.references import format_ref, span_ref
from langchain_context_pipeline.messages.trim import cut_end
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.stages.breaker import BreakerBank, conversation_key
from langchain_context_pipeline.stages.briefs import BriefFunction
from langchain_context_pipeline.stages.digest import DIGEST, build_digest, build_index
from langchain_context_pipeline.stages.model_call import (
    Plan,
    Reply,
    SummaryModel,
    SummaryRequest,
    acall_model,
    adrive,
    call_model,
    drive,
)
from langchain_context_pipeline.stages.prompt import build_prompt
from langchain_context_pipeline.stages.runnable import MessagesRunnable
from langchain_context_pipeline.stages.settings import CondenseSettings, override
from langchain_context_pipeline.stages.stats import CondenseStats
from langchain_context_pipeline.tokens.counters import message_text, resolve_token_counter
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["CondenseStats", "Condenser"]

logger = logging.getLogger("langchain_context_pipeline")


def resolve_summarizer(model: Any) -> SummaryModel | None:
    """Return the summarizer ``model`` names (``None`` for the digest).

    Raises:
        TypeError: when ``model`` is not a model, Runnable, callable, name or None.
        ImportError: for a ``"provider:model"`` name without ``langchain`` installed.
    """
    if model is None or model is DIGEST:
        return None
    if isinstance(model, str):
        if model == "digest":
            raise ValueError(
                "model='digest' is no longer accepted: pass model=DIGEST "
                "(from langchain_context_pipeline import DIGEST)"
            )
        if ":" not in model:
            raise ValueError(
                f"model={model!r}: a model name must be 'provider:model' (read with "
                "init_chat_model), e.g. 'openai:gpt-4o-mini'; for the digest pass model=DIGEST"
            )
        try:
            from langchain.chat_models import init_chat_model
        except ImportError as exc:
            raise ImportError(
                f"model={model!r} is a model name, read with init_chat_model, which needs "
                "the agents extra: pip install 'langchain-context-pipeline[agents]'"
            ) from exc
        try:
            return init_chat_model(model)
        except Exception as exc:  # unknown provider, missing package or credentials
            raise ValueError(f"model={model!r}: init_chat_model failed: {exc}") from exc
    if not (isinstance(model, Runnable) or callable(model)):
        raise TypeError(
            "model must be a BaseChatModel, a Runnable, a callable, a 'provider:model' name, "
            f"DIGEST or None, got {type(model).__name__}"
        )
    return model  # type: ignore[no-any-return]


def _reply_text(reply: Reply) -> tuple[str | None, str | None]:
    """Return (text, None) for a usable reply, else (None, why it is unusable)."""
    if isinstance(reply, BaseException):
        return None, f"{type(reply).__name__}: {reply}"
    if reply is None:
        return None, "the summarizer returned None"
    if isinstance(reply, BaseMessage):
        text = message_text(reply)
        if not text.strip() and not isinstance(reply.content, str):
            return None, "the summarizer returned no text blocks"
    elif isinstance(reply, str):
        text = reply
    else:
        return None, f"the summarizer returned {type(reply).__name__}, not text or a message"
    text = text.strip()
    if text.startswith(CONDENSED_TAG):
        text = text[len(CONDENSED_TAG) :].strip()
    if not text:
        return None, "the summarizer returned empty text"
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
        settings: CondenseSettings | None = None,
        *,
        head_count: int = 2,
        tail_budget: int = 8000,
        token_counter: Any = None,
        briefs: Mapping[str, BriefFunction] | None = None,
        **keywords: Any,
    ) -> None:
        """Configure the Condenser.

        Args:
            model: the summarizer: a ``BaseChatModel``, a Runnable, a callable taking
                the prompt messages and returning text or a message (sync or
                async: an async-only summarizer also serves :meth:`condense`, on a
                private event loop), or a ``"provider:model"`` name for
                ``init_chat_model``; ``None`` or :data:`DIGEST` condenses with the
                deterministic digest only.
            settings: summary sizes, prompt, timeout and circuit breaker.
            head_count: the first N messages kept verbatim (the task), when the
                Condenser runs on its own (the pipeline passes its split instead).
            tail_budget: tokens of newest messages kept verbatim, likewise.
            token_counter: how tokens are counted (default: the estimate).
            briefs: brief functions for your tools, used by the digest.
            **keywords: :class:`CondenseSettings` fields, overriding ``settings``.

        Raises:
            ValueError: for inconsistent sizes or a prompt that cannot be formatted.
            TypeError: when ``model`` is not a model, Runnable or callable, or for an
                unknown keyword.
        """
        check_int("head_count", head_count)
        check_int("tail_budget", tail_budget)
        self.settings: CondenseSettings = override(
            settings or CondenseSettings(), "Condenser", keywords
        )
        self.model: SummaryModel | None = resolve_summarizer(model)
        # Normalised once: every kind of summarizer is then called the same way.
        self._runnable = None if self.model is None else coerce_to_runnable(self.model)
        self.head_count = head_count
        self.tail_budget = tail_budget
        self.token_counter = resolve_token_counter(token_counter)
        self.briefs = dict(briefs or {})
        # One breaker per conversation: failures in one never change another's output.
        self.breakers = BreakerBank(self.settings.failure_limit, self.settings.cooldown_calls)

    # -- planning (shared by sync and async) ---------------------------------------

    def plan(
        self,
        messages: Sequence[BaseMessage],
        where: Split,
        meter: Meter,
        stats: CondenseStats,
        room: int | None = None,
    ) -> Plan[list[BaseMessage]]:
        """Plan the condensed list, yielding a request when the summarizer is needed.

        ``where`` is the split of ``messages`` (the pipeline passes the one it pruned
        by, so the tail it keeps is the unpruned one and the next turn's prefix is
        the same). With ``room``, the summary takes at most that many tokens (the
        pipeline passes what truncation would leave it). Returns the new list, or a
        copy of ``messages`` when there is no middle worth condensing.
        """
        settings = self.settings
        middle = range(where.head_end, where.tail_start)
        kept_system = [messages[i] for i in middle if i in where.systems]
        replaced = [messages[i] for i in middle if i not in where.systems]
        replaced_tokens = sum(meter.one(m) for m in replaced)
        if not replaced or replaced_tokens <= settings.min_summary_tokens:
            return list(messages)
        priors = [m for m in replaced if is_pipeline_summary(m)]
        previous = "\n\n".join(summary_text(m) for m in priors) or None
        body = [m for m in replaced if not is_pipeline_summary(m)]
        budget = min(settings.summary_budget(replaced_tokens), replaced_tokens - 1)
        if room is not None:  # the room beside what truncation must keep
            budget = max(min(budget, room), 1)

        text: str | None = None
        breaker = None if self.model is None else self.breakers.get(conversation_key(messages))
        if breaker is not None and not breaker.allow():
            stats.summarizer_skipped += 1
            logger.warning("summarizer circuit breaker open; using the deterministic digest")
        elif breaker is not None:
            failure: str | None = None
            try:
                prompt = build_prompt(body, previous, budget, settings.instructions)
            except Exception as exc:  # never a crash: the digest stands in, as for a failure
                prompt, failure = None, f"the summarizer's prompt could not be built: {exc!r}"
            if prompt is not None:
                stats.summarizer_calls += 1
                text, failure = _reply_text((yield SummaryRequest(prompt, budget)))
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
            stats.breaker_opened = breaker.record(text is not None)
            if text is None:
                stats.summarizer_failures += 1
                stats.failure = failure
                logger.warning("summarizer failed (%s); using the deterministic digest", failure)
        if text is None:
            digest = build_digest(body, previous, budget * 4, briefs=self.briefs)
            summary = self._summary_message(digest, replaced, budget, meter, "digest")
        stats.breaker_open = breaker is not None and breaker.is_open
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
        span = span_ref(replaced)
        # The summary's last line names the originals it replaces, for recall.
        named = f"\nOriginals: {format_ref(span)}"
        key = hashlib.sha256()
        for m in replaced:
            key.update((m.id or message_text(m)).encode("utf-8", "surrogatepass"))
        key.update(text.encode("utf-8", "surrogatepass"))
        message_id = f"context-summary-{key.hexdigest()[:20]}"
        chars = max(budget, 1) * 4
        while True:
            body = cut_end(text, chars - len(named)) if chars > len(named) else ""
            content = f"{CONDENSED_TAG}\n{body}{named}"
            message = HumanMessage(
                content=content,
                id=message_id,
                response_metadata=pipeline_mark(
                    "summary",
                    content,
                    message_id,
                    source=source,
                    covered=len(replaced),
                    through=through,
                    span=span,
                ),
            )
            if chars <= 0 or meter.one(message) <= budget:
                return message
            chars = chars * 4 // 5 - 1

    # -- sync and async shells ------------------------------------------------------

    def _answer(self, request: SummaryRequest) -> Reply:
        assert self._runnable is not None  # the planner asks only when there is a model
        return call_model(self._runnable, request, self.settings.summary_timeout)

    async def _aanswer(self, request: SummaryRequest) -> Reply:
        assert self._runnable is not None
        return await acall_model(self._runnable, request, self.settings.summary_timeout)

    def _own_plan(
        self, messages: Sequence[BaseMessage], stats: CondenseStats
    ) -> Plan[list[BaseMessage]]:
        meter = Meter(self.token_counter)
        where = Split.of(messages, self.head_count).with_tail(messages, self.tail_budget, meter)
        return self.plan(messages, where, meter, stats)

    def condense(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], CondenseStats]:
        """Condense ``messages``; return the new list and what was done."""
        stats = CondenseStats()
        plan = self._own_plan(messages, stats)
        with one_pass():  # the plan reads each message once
            return drive(plan, self._answer), stats

    async def acondense(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[list[BaseMessage], CondenseStats]:
        """Async :meth:`condense`: only the summarizer call differs."""
        stats = CondenseStats()
        plan = self._own_plan(messages, stats)
        with one_pass():
            return await adrive(plan, self._aanswer), stats

    def _transform(self, messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        return self.condense(messages)[0]

    async def _atransform(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> list[BaseMessage]:
        return (await self.acondense(messages))[0]
