"""One model call's turn, shared by the LangGraph hook and the agent middleware.

Both entry points do the same around each model call: read the carried summary
and the calibration from state (once), compute the budget (the threshold and the
tokens the system prompt and tools take beside the messages), compress and refit
until the output fits what the calibration allows, record what is sent, and write
back what changed. This module holds those parts as plain functions and data.
An entry point writes its turn as a generator that does no I/O itself: it yields
:class:`Compress` steps (and steps of its own: the model call, the archive) and is
sent their answers; :func:`drive` / :func:`adrive` (the planners' own, from
:mod:`~langchain_context_pipeline.stages.model_call`) run it, answering each step with
the entry point's sync or async callable (:meth:`Compress.run` / :meth:`Compress.arun`
for a compression). Sync and async differ only in how a step is answered, as in
:meth:`ContextPipeline.compress` / ``acompress``.

:class:`WarnOnce` is the one warn-once rule: a kind of reason (its first two words,
not its numbers) is logged once per entry-point instance.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage

from langchain_context_pipeline.core.events import (
    Refit,
    acompress_fitted,
    compress_fitted,
)
from langchain_context_pipeline.core.pipeline import ContextPipeline, OverBudget
from langchain_context_pipeline.core.report import CompressionResult
from langchain_context_pipeline.messages.references import content_ref, message_ref
from langchain_context_pipeline.stages.carried import CarriedSummary
from langchain_context_pipeline.stages.hysteresis import StandingCuts
from langchain_context_pipeline.stages.model_call import adrive, drive
from langchain_context_pipeline.tokens.calibration import CALIBRATION_STATE_KEY, Calibration
from langchain_context_pipeline.tokens.prefix import request_digests

__all__ = [
    "Budget",
    "Compress",
    "Turn",
    "TurnInput",
    "WarnOnce",
    "adrive",
    "carry_over",
    "compress_args",
    "drive",
    "learn_from_history",
    "observe",
    "read_calibration",
    "read_graph_state",
    "read_summary",
    "read_turn",
    "refit",
    "reply_after",
    "sending",
    "state_keys",
    "state_value",
    "summary_update",
]

logger = logging.getLogger("langchain_context_pipeline")

T = TypeVar("T")


# -- reading state ----------------------------------------------------------------------


def state_value(state: Any, key: str) -> Any:
    """Return ``state[key]`` of a mapping or an attribute of an object state, else ``None``."""
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def read_summary(state: Any, key: str) -> tuple[Any, CarriedSummary | None]:
    """Return the stored value of the summary key and the summary it carries.

    The key is written by graph code alone (private to the graph, or
    ``PrivateStateAttr``), so the summary is trusted without a signature: a restart
    or another worker reuses it with no key to share (see
    :meth:`CarriedSummary.from_state`).
    """
    stored = state_value(state, key)
    return stored, CarriedSummary.from_state(stored, key)


def read_calibration(state: Any) -> tuple[Any, Calibration]:
    """Return the stored value of the calibration key and the calibration it holds."""
    stored = state_value(state, CALIBRATION_STATE_KEY)
    return stored, Calibration.from_state(stored)


def state_keys(summary_key: str) -> dict[str, Any]:
    """Return the state keys a turn reads, with their types (a node's input schema)."""
    return {
        "messages": list[AnyMessage],
        "llm_input_messages": list[AnyMessage],
        summary_key: dict[str, Any] | None,
        CALIBRATION_STATE_KEY: dict[str, Any] | None,
    }


def message_mark(message: BaseMessage) -> str:
    """What finds a message again in a later history: its id, else a reference to its content."""
    return message.id if message.id else f"ref:{message_ref(message)}"


def _stands_for(message: BaseMessage, mark: str) -> bool:
    """Whether ``message`` is the one marked ``mark``, or was before it had an id.

    ``add_messages`` gives an id to every message without one when it adds the reply.
    """
    if message_mark(message) == mark:
        return True
    return bool(message.id) and mark == f"ref:{content_ref(message)}"


def reply_after(
    messages: Sequence[BaseMessage], after: str | None, at: int = 0
) -> BaseMessage | None:
    """Return the reply to the request last sent: the first AI message after its last message.

    That message (``after``, its :func:`message_mark`) is looked for where it stood,
    the ``at``-th message of the history; else by its id, when one message alone has
    it. When neither finds it (a history rewritten, its ids missing or repeated) no
    reply is returned: a reply taken for another request's would credit this one
    with a count the provider never gave it.
    """
    if after is None:
        return None
    if 0 < at <= len(messages) and _stands_for(messages[at - 1], after):
        start = at
    else:
        found = [i for i, m in enumerate(messages) if m.id == after]
        if len(found) != 1:
            return None
        start = found[0] + 1
    # An AIMessageChunk too (a model node that keeps the merged stream): its type is
    # "AIMessageChunk", not "ai".
    return next((m for m in messages[start:] if isinstance(m, AIMessage)), None)


@dataclass(frozen=True)
class TurnInput:
    """What one call reads from state, read once."""

    messages: list[BaseMessage]
    """The conversation to compress."""
    stored: Any
    """The summary key's value as the state holds it (to tell whether it changed)."""
    carried: CarriedSummary | None
    """The summary carried from the previous call, if any."""
    stored_calibration: Any
    """The calibration key's value as the state holds it."""
    calibration: Calibration
    """The calibration it holds."""


def read_turn(state: Any, messages: Any, summary_key: str) -> TurnInput:
    """Read the summary and the calibration of ``state`` once; ``messages`` as a list."""
    stored, carried = read_summary(state, summary_key)
    stored_calibration, calibration = read_calibration(state)
    listed = messages if isinstance(messages, list) else list(messages)
    return TurnInput(listed, stored, carried, stored_calibration, calibration)


def read_graph_state(state: Any, summary_key: str, *, persist: bool) -> TurnInput:
    """Read a graph state for the pre-model hook, which sees no request.

    In persist mode the summary is in ``messages`` (the key records which message
    it is), so nothing is carried beside them; otherwise, without the key, the
    summary the model saw last is still in ``llm_input_messages``, where only its
    signed mark can tell it apart.
    """
    messages = state_value(state, "messages")
    if messages is None:
        raise ValueError(
            "the pre-model hook needs the conversation under the 'messages' key of "
            f"the graph state, got keys {sorted(state) if isinstance(state, Mapping) else []}"
        )
    read = read_turn(state, messages, summary_key)
    if persist:
        vouched = read.carried.vouch_for(messages) if read.carried else list(messages)
        return replace(read, messages=vouched, carried=None)
    if read.carried is None:
        previous = state_value(state, "llm_input_messages")
        if isinstance(previous, Sequence) and previous:
            return replace(read, carried=CarriedSummary.of(previous))
    return read


# -- warnings ---------------------------------------------------------------------------


class WarnOnce:
    """Log each kind of reason once per owner (its first two words, not its numbers)."""

    def __init__(self) -> None:
        """Start with nothing warned about."""
        self.seen: set[str] = set()

    def first(self, reason: str) -> bool:
        """Return whether this kind of ``reason`` is new (and remember it)."""
        key = " ".join(reason.split(" ", 2)[:2])
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def warning(self, template: str, reason: str) -> None:
        """Log ``template % reason`` as a warning the first time its kind is seen."""
        if self.first(reason):
            logger.warning(template, reason)


def observe(
    calibration: Calibration,
    reply: BaseMessage | None,
    identity: tuple[str | None, str | None],
    warn: WarnOnce,
) -> Calibration:
    """Learn from ``reply`` to the request last sent; warn once when it is ignored."""
    observed, ignored = calibration.observe(reply, identity)
    if ignored is not None:
        warn.warning("token calibration: %s; the correction is unchanged", ignored)
    return observed.settled()


def learn_from_history(
    read: TurnInput, identity: tuple[str | None, str | None], warn: WarnOnce
) -> Calibration:
    """Learn from the reply to the request last sent, found in the history (the hook)."""
    calibration = read.calibration
    if calibration.sent <= 0:
        return calibration
    reply = reply_after(read.messages, calibration.after, calibration.at)
    return observe(calibration, reply, identity, warn)


# -- budget and compression -------------------------------------------------------------


class Budget(NamedTuple):
    """One call's budget: its threshold and what the request spends beside the messages.

    A pair, as ``(threshold, reserved)``.
    """

    threshold: int
    """The call's threshold, in the provider's tokens."""
    reserved: int
    """The tokens of the system prompt and the tools' schemas, by the pipeline's counter."""


def compress_args(
    carried: CarriedSummary | None,
    threshold: int | None,
    reserved: int,
    over_budget: OverBudget,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """Return the keyword arguments of one :meth:`ContextPipeline.compress` call.

    ``calibration``: the thread's record, whose last request's cuts the call starts from.
    """
    return {
        "carried_summary": carried,
        "reserved_tokens": reserved,
        "threshold": threshold,
        "over_budget": over_budget,
        "standing_cuts": None if calibration is None else StandingCuts.from_value(calibration.cuts),
    }


def refit(
    calibration: Calibration,
    budget: Budget,
    seed: str,
    result: CompressionResult,
    args: dict[str, Any],
    last: bool,
) -> dict[str, Any] | None:
    """Return the arguments to compress again with, or ``None`` when ``result`` fits.

    The first budget credits the newest request the provider counted; when the
    output no longer repeats it (compaction replaced part of it), the output is
    held to what the prefix it does repeat allows (see :mod:`.calibration`); the
    ``last`` compression credits no prefix at all.
    """
    if result.report.over_budget:
        return None
    tried = budget.threshold if args["threshold"] is None else args["threshold"]
    digests, own = request_digests(seed, result.messages)
    tokens = result.report.tokens_after + budget.reserved
    again = calibration.refit(budget.threshold, tried, tokens, digests, own)
    if again is None:
        return None
    if last:
        again = min(again, calibration.budget(budget.threshold))
    if again <= budget.reserved:
        return None
    return carry_over({**args, "threshold": again}, result)


def carry_over(args: dict[str, Any], result: CompressionResult) -> dict[str, Any]:
    """Pass ``result``'s summary to the next pass of the same call (not paid for twice)."""
    if result.carried_summary is not None:
        args["carried_summary"] = result.carried_summary
    return args


def sending(
    calibration: Calibration,
    budget: Budget,
    seed: str,
    result: CompressionResult,
    within: int,
    history: Sequence[BaseMessage] = (),
) -> Calibration:
    """Record on the calibration what ``result`` sends (compressed ``within`` that budget).

    ``history``: the conversation it was compressed from, when the reply is to be
    found after it later (the hook; the middleware is handed the reply).
    """
    result.report.correction = calibration.correction
    digests, own = request_digests(seed, result.messages)
    tokens = result.report.tokens_after + budget.reserved
    cuts = None if result.report.cuts is None else result.report.cuts.to_value()
    after = message_mark(history[-1]) if history else None
    return calibration.sending(tokens, after, digests, within, cuts, own, len(history))


def summary_update(key: str, stored: Any, result: CompressionResult) -> dict[str, Any]:
    """Return ``{key: summary}`` when the carried summary changed, else ``{}``."""
    carried = None if result.carried_summary is None else result.carried_summary.to_dict()
    if carried != (stored if isinstance(stored, Mapping) else None):
        return {key: carried}
    return {}


# -- driving a turn ---------------------------------------------------------------------


@dataclass(frozen=True)
class Compress:
    """A step of a turn: compress ``messages``, refitting while ``refit`` asks.

    Answered with the result and the arguments it was compressed with.
    """

    messages: list[BaseMessage]
    args: dict[str, Any]
    refit: Refit | None = None
    attempts: int = 1

    def run(self, pipeline: ContextPipeline) -> tuple[CompressionResult, dict[str, Any]]:
        """Answer the step."""
        return compress_fitted(pipeline, self.messages, self.args, self._refit, self.attempts)

    async def arun(self, pipeline: ContextPipeline) -> tuple[CompressionResult, dict[str, Any]]:
        """Answer the step, the summarizer awaited."""
        return await acompress_fitted(
            pipeline, self.messages, self.args, self._refit, self.attempts
        )

    def _refit(
        self, result: CompressionResult, args: dict[str, Any], last: bool
    ) -> dict[str, Any] | None:
        return None if self.refit is None else self.refit(result, args, last)


Turn = Generator[Any, Any, T]
"""A turn: yields steps, is sent their answers (or thrown what answering raised).

Run by :func:`~langchain_context_pipeline.stages.model_call.drive` (or ``adrive``),
which throws what answering a step raised back in, so the turn's own cleanup runs.
"""
