"""The summary carried between turns, so the summarizer is not called every turn."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.marks import MARK_KEY_ENV, METADATA_KEY, is_pipeline_summary
from langchain_context_pipeline.tokens import estimate_message_tokens, message_text

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
        """Read a running summary stored in graph state under ``key``.

        Accepts what :meth:`to_dict` wrote (or a ``CarriedSummary``) whose signed
        mark verifies; anything else, a damaged or forged value included, is
        ignored with a warning: the next pass then works without it, which costs
        a summary but loses nothing.
        """
        if value is None:
            return None
        if isinstance(value, CarriedSummary):
            if value.verified:
                return value
            logger.warning("ignoring state[%r]: its mark does not verify", key)
            return None
        if isinstance(value, Mapping):
            try:
                return cls.from_dict(value)
            except ValueError as exc:
                logger.warning("ignoring state[%r]: %s", key, exc)
                return None
        logger.warning("ignoring state[%r]: not a running summary (%s)", key, type(value).__name__)
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CarriedSummary:
        """Rebuild from :meth:`to_dict` output.

        The summary's signed mark must verify (see :mod:`.marks`): a summary that
        another graph node, a user or a different key wrote is not trusted.

        Raises:
            ValueError: when ``data`` lacks the keys ``to_dict`` writes, or its
                mark does not verify.
        """
        try:
            meta = dict(data["meta"])
            message = HumanMessage(
                content=str(data["text"]), id=data["id"], response_metadata={METADATA_KEY: meta}
            )
            carried = cls(message=message, through=str(data["through"]))
        except KeyError as exc:
            raise ValueError(f"not a running summary: missing {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a running summary: {exc}") from exc
        if not carried.verified:
            raise ValueError(
                "not a running summary: its mark does not verify (written by something "
                f"else than the pipeline, or under another key: set {MARK_KEY_ENV} alike "
                "on every worker)"
            )
        return carried

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
