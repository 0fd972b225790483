"""The summary carried between turns, so the summarizer is not called every turn."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.messages.marks import (
    MARK_KEY_ENV,
    METADATA_KEY,
    SIGNATURE_FIELD,
    is_pipeline_summary,
    vouched_mark,
)
from langchain_context_pipeline.tokens.counters import estimate_message_tokens, message_text

__all__ = ["SUMMARY_STATE_KEY", "CarriedSummary"]

logger = logging.getLogger("langchain_context_pipeline")

SUMMARY_STATE_KEY = "context_pipeline_summary"
"""The graph-state key of the carried summary, for the hook and the middleware alike."""


@dataclass(frozen=True)
class CarriedSummary:
    """A summary carried between turns, so the summarizer is not called every turn.

    Stored in graph state as :meth:`to_dict`; the next pass puts the summary in
    place of the turns it covers and calls the summarizer again only when what
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
    def from_state(cls, value: Any, key: str) -> CarriedSummary | None:
        """Read the running summary kept in the private graph-state key ``key``.

        The key is trusted by where it is, not by a signature: only graph code
        writes it (the hook and the middleware; otherwise only the application's
        own nodes, tools returning a ``Command``, or ``update_state``), never the
        content of a message, and whoever writes it could as well rewrite
        ``messages`` themselves. So a summary another process wrote, under another
        mark key, is reused after a restart without a key to share; it is signed
        again under this process's key (see :meth:`vouched`) for the pass.

        Accepts what :meth:`to_dict` wrote, or a ``CarriedSummary``. Anything else,
        a damaged value included, is ignored with a warning: the next pass then
        works without it, which costs a summary but loses nothing.
        """
        if value is None:
            return None
        if isinstance(value, CarriedSummary):
            return value if value.verified else value.vouched()
        if isinstance(value, Mapping):
            try:
                return cls.from_dict(value, verify=False)
            except ValueError as exc:
                logger.warning("ignoring state[%r]: %s", key, exc)
                return None
        logger.warning("ignoring state[%r]: not a running summary (%s)", key, type(value).__name__)
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, verify: bool = True) -> CarriedSummary:
        """Rebuild from :meth:`to_dict` output.

        Args:
            data: what :meth:`to_dict` returned.
            verify: check the summary's signed mark (see :mod:`.marks`), so that a
                summary another graph node, a user or a different key wrote is not
                trusted. ``False`` is for data whose origin vouches for it (a
                private state key, see :meth:`from_state`): its mark is signed again
                under this process's key.

        Raises:
            ValueError: when ``data`` lacks the keys ``to_dict`` writes, or (with
                ``verify``) its mark does not verify.
        """
        try:
            meta = dict(data["meta"])
            text, message_id, through = data["text"], data["id"], data["through"]
            for name, value in (("text", text), ("id", message_id), ("through", through)):
                if not isinstance(value, str) and not (name == "id" and value is None):
                    raise TypeError(f"{name!r} must be a string, got {type(value).__name__}")
            message = HumanMessage(
                content=text, id=message_id, response_metadata={METADATA_KEY: meta}
            )
            carried = cls(message=message, through=through)
        except KeyError as exc:
            raise ValueError(f"not a running summary: missing {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a running summary: {exc}") from exc
        if not verify:
            return carried.vouched()
        if not carried.verified:
            raise ValueError(
                "not a running summary: its mark does not verify (written by something "
                f"else than the pipeline, or under another key: set {MARK_KEY_ENV} alike "
                "on every worker)"
            )
        return carried

    def vouched(self) -> CarriedSummary:
        """Return this summary with its mark signed under this process's key.

        Only for a summary whose origin vouches for it (a private state key): the
        pass then treats it as the pipeline's own, as it treats one it just wrote.
        """
        meta = self.message.response_metadata.get(METADATA_KEY)
        fields = {**(meta if isinstance(meta, Mapping) else {}), "through": self.through}
        text, message_id = self.text, self.message.id
        message = HumanMessage(
            content=text,
            id=message_id,
            response_metadata=vouched_mark("summary", text, message_id, fields),
        )
        return CarriedSummary(message=message, through=self.through)

    def vouch_for(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Return ``messages`` with the summary this record names signed under this process's key.

        For the hook's persist mode, where the summary lives in ``messages`` and
        the private state key keeps a record of it (this summary, read with
        :meth:`from_state`). Only a ``HumanMessage`` with the record's id, text
        and mark (its signature aside) is the summary: a copy of it is the
        pipeline's own text, and anything else, whatever mark it carries, stays
        ordinary content. ``messages`` itself is not changed.
        """
        out = list(messages)
        mine = _fields(self.message)
        for i, message in enumerate(out):
            if (
                isinstance(message, HumanMessage)
                and message.id == self.message.id
                and message.content == self.text
                and not is_pipeline_summary(message)
                and _fields(message) == mine
            ):
                out[i] = self.message
        return out

    @property
    def verified(self) -> bool:
        """Whether the message is a summary the pipeline signed, covering ``through``."""
        if not is_pipeline_summary(self.message):
            return False
        return bool(self.message.response_metadata[METADATA_KEY].get("through") == self.through)

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> CarriedSummary | None:
        """Return the running summary a compressed list carries, if any."""
        for message in messages:
            if is_pipeline_summary(message):
                meta = message.response_metadata[METADATA_KEY]
                through = meta.get("through")
                if isinstance(through, str):
                    return cls(message=message, through=through)
        return None


def _fields(message: BaseMessage) -> dict[str, Any] | None:
    """The fields of a message's mark, its signature aside (None without a mark)."""
    meta = message.response_metadata.get(METADATA_KEY)
    if not isinstance(meta, Mapping):
        return None
    return {k: v for k, v in meta.items() if k != SIGNATURE_FIELD}
