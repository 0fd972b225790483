"""Calibration: budget each request by what the provider reports it charged.

The hook and the middleware know what they sent in each model call, counted by the
pipeline's counter; the provider's reply carries ``usage_metadata["input_tokens"]``.
The record of a thread (:class:`Calibration`, stored in graph state under
:data:`CALIBRATION_STATE_KEY`, so that it survives restarts and is shared by
workers) keeps, for the last requests the provider counted, how many messages they
held, a digest of them (and of the system prompt and tools sent beside them), what
the counter said and what the provider reported.

The next request is budgeted as **the provider's count of the longest such request
it repeats unchanged, plus the counter's estimate of every message after it**: a
request of ``n`` counted tokens whose first ``k`` messages (and overhead) are a
request the provider counted at ``R`` while the counter said ``C``, must keep
``n - C`` (what is new) within ``threshold - R``. That is exact where the provider
counted and as conservative as the counter where it did not, so a change of content
mix (English first, dense tool output next) cannot make it overshoot. Whether the
output repeats the counted prefix is only known once it is compressed: the entry
points compress with the longest prefix's budget and, when the output broke that
prefix (compaction replaced a turn of it), again within the budget the output's own
kept prefix allows (:meth:`Calibration.refit`).

The ratio ``correction`` (the provider's tokens per counted token, with a 3% margin)
is kept for what the provider never saw, and only upwards: the default estimate never
counts below real tokenizers, so scaling it down for content the provider has not
counted is what overshot; a counter that undercounts (a custom one, or chars/4 for
Chinese) is corrected up.

Guards (LangChain's own attempt was reverted for the first): every part of the
request is counted (the middleware adds the system message and the tool schemas,
the hook those it is given);
a reply from another provider or model than the agent's, a reply without usage and
absurd usage (not a positive integer, or more than :data:`MAX_CORRECTION` times off)
change nothing; the correction stays within [:data:`MIN_CORRECTION`,
:data:`MAX_CORRECTION`]. The first measurement replaces the default at once; after
it, a reply raises the correction as far as it measures but lowers it by
:data:`MAX_DECREASE` at most.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_pipeline.tokens.counted import (
    Counted,
    CutIds,
    Span,
    counted_of,
    cut_ids_of,
    model_identity,
    pending_of,
    reply_identity,
    same_model,
    span_credit,
    span_of,
    stored_list,
)
from langchain_context_pipeline.tokens.overflow import OVERFLOW_TIGHTENING, shrink_factor
from langchain_context_pipeline.tokens.prefix import (
    prefix_digests,
    request_overhead,
    request_seed,
    span_digest,
    tools_tokens,
)

__all__ = [
    "CALIBRATION_STATE_KEY",
    "MAX_CORRECTION",
    "MIN_CORRECTION",
    "OVERFLOW_TIGHTENING",
    "Calibration",
    "model_identity",
    "prefix_digests",
    "request_overhead",
    "request_seed",
    "tools_tokens",
]

CALIBRATION_STATE_KEY = "context_pipeline_calibration"
"""The state key of the per-thread calibration (hook and middleware alike)."""

MIN_CORRECTION = 0.5
"""The lowest correction: the budget never grows past twice the estimate's."""
MAX_CORRECTION = 4.0
"""The highest correction; a reported count further off than this is ignored."""
SAFETY_MARGIN = 1.03
"""Applied on top of the measured ratio: requests differ a little in their mix."""
MAX_DECREASE = 0.03
"""The most one reply lowers the correction by, once it has been measured."""
MAX_COUNTED = 16
"""How many counted requests a record keeps (the newest): each may be the next prefix."""
MAX_SPANS = 128
"""How many counted spans a record keeps (the newest): runs of messages whose tokens
the provider's counts tell apart, found again wherever they stand in a later request."""
FIT_ATTEMPTS = 3
"""The most compressions of one call: the prefix's budget, the kept prefix's, no prefix's."""
BUDGET_STEP = 8
"""The last call's budget is tried first unless the counted prefix allows
``threshold / BUDGET_STEP`` more: a steady limit keeps the cuts (and the provider's
prompt cache) where they were."""


@dataclass(frozen=True)
class Calibration:
    """The per-thread record of what the provider counted, and what the last call sent."""

    correction: float = 1.0
    """Provider tokens per counted token (with the safety margin); 1.0 until measured."""
    sent: int = 0
    """Tokens of the last request by the pipeline's counter (all of it), awaiting a reply."""
    after: str | None = None
    """The last message of that request, by its id (a reference to its content when it
    has none): its reply is the first AIMessage after it."""
    samples: int = 0
    """Replies that moved the correction."""
    pending: tuple[int, str] | None = None
    """Messages and digest (:func:`prefix_digests`) of the request awaiting a reply."""
    counted: tuple[Counted, ...] = ()
    """Requests the provider counted that the last request still repeats, oldest first."""
    held: int = 0
    """The budget (the counter's tokens) the last request was compressed within."""
    cuts: CutIds | None = None
    """Where the last request's cuts stood, by message id (the pipeline's
    ``report.cuts``): the next call starts from them, so its budget need not be held."""
    spans: tuple[Span, ...] = ()
    """Runs of messages the provider counted, oldest first (see :data:`Span`)."""
    pending_span: Span | None = None
    """The run the request awaiting a reply added to a counted request: its digests
    and size, with that request's counted and reported tokens (the reply's count less
    these is the run's)."""
    at: int = 0
    """How many messages the history held when that request was sent (0: not known):
    ``after`` is found there first, so that a history whose messages carry no ids, or
    the same id twice, still gives the reply to that request and no other."""

    @classmethod
    def from_state(cls, value: Any) -> Calibration:
        """Read a calibration from graph state; anything malformed reads as none."""
        if not isinstance(value, Mapping):
            return cls()
        try:
            correction = float(value.get("correction", 1.0))
            sent = int(value.get("sent", 0))
            samples = int(value.get("samples", 0))
        except (TypeError, ValueError):
            return cls()
        after = value.get("after")
        if not math.isfinite(correction) or not MIN_CORRECTION <= correction <= MAX_CORRECTION:
            return cls()
        held = value.get("held", 0)
        at = value.get("at", 0)
        return cls(
            correction,
            max(sent, 0),
            after if isinstance(after, str) else None,
            samples,
            pending_of(value.get("pending")),
            stored_list(counted_of, value.get("counted"), MAX_COUNTED),
            held if isinstance(held, int) and not isinstance(held, bool) and held > 0 else 0,
            cut_ids_of(value.get("cuts")),
            stored_list(span_of, value.get("spans"), MAX_SPANS),
            span_of(value.get("pending_span")),
            at if isinstance(at, int) and not isinstance(at, bool) and at > 0 else 0,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form stored in graph state."""
        out = asdict(self)
        out["pending"] = None if self.pending is None else list(self.pending)
        out["counted"] = [list(c) for c in self.counted]
        out["cuts"] = None if self.cuts is None else list(self.cuts)
        out["spans"] = [list(sp) for sp in self.spans]
        out["pending_span"] = None if self.pending_span is None else list(self.pending_span)
        return out

    @property
    def _unseen(self) -> float:
        """The factor on what the provider never counted: the correction, never below 1."""
        return max(1.0, self.correction)

    def budget(self, threshold: int) -> int:
        """Return ``threshold`` in the counter's tokens for a request the provider never saw.

        ``threshold / correction`` when the counter was measured low; ``threshold``
        itself otherwise (the default estimate is conservative: a request that
        repeats nothing counted is trusted to it).
        """
        return max(1, math.floor(threshold / self._unseen))

    def _prefix_budget(
        self, threshold: int, entry: Counted, spans: tuple[int, int] = (0, 0)
    ) -> int:
        counted, reported = entry[2] + spans[0], entry[3] + spans[1]
        return max(1, math.floor(counted + (threshold - reported) / self._unseen))

    def first_budget(self, threshold: int) -> int:
        """Return the budget to compress with first: the newest counted request's.

        It holds only if the output repeats that request (:meth:`refit` checks). The
        last call's budget is tried instead unless that one is ``threshold /
        BUDGET_STEP`` more: the planner's cuts depend on its limit, and a limit that
        moved every call would move them every call (and :meth:`refit` still lowers
        it when the output would not fit).
        """
        if not self.counted:
            return self.budget(threshold)
        budget = self._prefix_budget(threshold, max(self.counted, key=lambda c: c[0]))
        if self.cuts is not None:
            return budget  # the cuts are carried: a new budget cannot move those already made
        if self.held > 0 and budget < self.held + max(1, threshold // BUDGET_STEP):
            return self.held
        return budget

    def fitting_budget(
        self,
        threshold: int,
        digests: Sequence[str],
        message_digests: Sequence[str] | None = None,
    ) -> int:
        """Return the budget of an output with these prefix digests (:func:`prefix_digests`).

        The budget of the longest counted request it repeats, or :meth:`budget`
        when it repeats none; given the output's ``message_digests`` (see
        :func:`~langchain_context_pipeline.tokens.prefix.request_digests`), the
        counted spans found after that prefix are credited at the provider's count too.
        """
        kept = [c for c in self.counted if c[0] < len(digests) and digests[c[0]] == c[1]]
        entry = max(kept, key=lambda c: c[0]) if kept else None
        start = 0 if entry is None else entry[0]
        spans = (
            (0, 0) if message_digests is None else span_credit(self.spans, message_digests, start)
        )
        if entry is None:
            if spans == (0, 0):
                return self.budget(threshold)
            entry = (0, "", 0, 0)
        return self._prefix_budget(threshold, entry, spans)

    def refit(
        self,
        threshold: int,
        tried: int,
        tokens: int,
        digests: Sequence[str],
        message_digests: Sequence[str] | None = None,
    ) -> int | None:
        """Return a smaller budget to compress again with, or ``None`` when the output fits.

        Args:
            threshold: this call's threshold, in the provider's tokens.
            tried: the budget the output was compressed within.
            tokens: what the output costs (messages and overhead) by the counter.
            digests: the output's prefix digests.
            message_digests: the digests of its messages, each alone (spans credited).
        """
        allowed = self.fitting_budget(threshold, digests, message_digests)
        if tokens <= allowed:
            return None
        return max(1, min(allowed, tried - 1))

    def sending(
        self,
        tokens: int,
        after: str | None = None,
        digests: Sequence[str] | None = None,
        budget: int = 0,
        cuts: CutIds | None = None,
        message_digests: Sequence[str] | None = None,
        at: int = 0,
    ) -> Calibration:
        """Record what this call sends (counted by the pipeline's counter).

        With ``digests`` (the request's :func:`prefix_digests`), the counted requests
        it no longer repeats are forgotten and it awaits its reply's count;
        ``budget`` is what it was compressed within, ``cuts`` where its cuts stand.
        With ``message_digests`` too, the messages it adds to the longest counted
        request it repeats await their count as a span.
        """
        if digests is None:
            return replace(
                self,
                sent=tokens,
                after=after,
                at=at,
                pending=None,
                held=budget,
                cuts=cuts,
                pending_span=None,
            )
        kept = tuple(c for c in self.counted if c[0] < len(digests) and digests[c[0]] == c[1])
        pending_span: Span | None = None
        if kept and message_digests is not None:
            n, _, counted, reported = max(kept, key=lambda c: c[0])
            added = message_digests[n:]
            if added:
                pending_span = (added[0], span_digest(added), len(added), counted, reported)
        return replace(
            self,
            sent=tokens,
            after=after,
            at=at,
            pending=(len(digests) - 1, digests[-1]),
            counted=kept,
            held=budget,
            cuts=cuts,
            pending_span=pending_span,
        )

    def after_reply(self) -> Calibration:
        """Return the record once the reply was read: nothing awaits a count.

        The budget held and the cuts are kept only with a counted request to hold
        them against: without one, the budget does not move between calls, and the
        pipeline finds the same cuts again from the list alone.
        """
        return replace(
            self,
            sent=0,
            after=None,
            at=0,
            pending=None,
            held=self.held if self.counted else 0,
            cuts=self.cuts if self.counted else None,
            pending_span=None,
        )

    settled = after_reply
    """The former name of :meth:`after_reply`."""

    def observe(
        self, reply: BaseMessage | None, agent: tuple[str | None, str | None] = (None, None)
    ) -> tuple[Calibration, str | None]:
        """Update the correction from the reply to the request last sent.

        Args:
            reply: the model's reply (its ``usage_metadata`` and ``response_metadata``).
            agent: the agent model's ``(provider, model name)`` (:func:`model_identity`).

        Returns:
            The new calibration, and why the reply was ignored (``None`` when used).
        """
        if self.sent <= 0:
            return self, None
        if not isinstance(reply, AIMessage):
            return self, "no reply: the reply to the request last sent was not found"
        if not reply.usage_metadata:
            return self, "no usage: the model's reply has no usage_metadata"
        if not same_model(agent, reply_identity(reply)):
            source = reply_identity(reply)
            return self, f"other model: usage from {source}, not the agent's {agent}"
        reported = reply.usage_metadata.get("input_tokens")
        if not isinstance(reported, int) or isinstance(reported, bool) or reported <= 0:
            return self, f"bad count: reported input_tokens {reported!r} is not positive"
        ratio = reported / self.sent
        if not 1 / MAX_CORRECTION <= ratio <= MAX_CORRECTION:
            return self, (f"reported input_tokens {reported} is absurd for {self.sent} tokens sent")
        correction = ratio * SAFETY_MARGIN
        if self.samples:  # down slowly: the next request may hold another mix
            correction = max(correction, self.correction * (1 - MAX_DECREASE))
        correction = min(max(correction, MIN_CORRECTION), MAX_CORRECTION)
        counted = self.counted
        if self.pending is not None:
            counted = (*counted, (*self.pending, self.sent, reported))[-MAX_COUNTED:]
        spans = self.spans
        if self.pending_span is not None:
            first, digest, n, before, before_reported = self.pending_span
            added, added_reported = self.sent - before, reported - before_reported
            if added > 0 and added_reported > 0:
                spans = (*spans, (first, digest, n, added, added_reported))[-MAX_SPANS:]
        return replace(
            self, correction=correction, samples=self.samples + 1, counted=counted, spans=spans
        ), None

    def after_overflow(self, requested: int | None, window: int | None) -> Calibration:
        """Return the correction tightened by a context-length error.

        Args:
            requested: the tokens the provider counted in the rejected request, if it said.
            window: the provider's limit, if it said.
        """
        return replace(
            self,
            correction=min(
                self._unseen * shrink_factor(requested, window, SAFETY_MARGIN), MAX_CORRECTION
            ),
        )

    def retry_budget(self, threshold: int, requested: int | None, window: int | None) -> int:
        """Return the budget (the counter's tokens) of the retry after a context-length error.

        Called on the calibration of the rejected request (its :attr:`sent`): the
        retry is cut below the budget tightened by :meth:`after_overflow`, and below
        what the rejected request itself sent by the same factor, since a request can
        be rejected while under budget (a threshold above the model's real window).

        Args:
            threshold: this call's threshold, in the provider's tokens.
            requested: the tokens the provider counted in the rejected request, if it said.
            window: the provider's limit, if it said.
        """
        budget = self.after_overflow(requested, window).budget(threshold)
        if self.sent > 0:
            budget = min(
                budget, math.floor(self.sent / shrink_factor(requested, window, SAFETY_MARGIN))
            )
        return max(1, budget)
