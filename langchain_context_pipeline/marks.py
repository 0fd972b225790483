"""The pipeline's marks: how it recognises the messages it wrote itself.

A summary or a removal note carries ``response_metadata["context_pipeline"]``
with its ``kind``. Only that mark counts: a message that merely starts with
:data:`CONDENSED_TAG` is ordinary content.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.tokens import message_text

__all__ = [
    "CONDENSED_TAG",
    "METADATA_KEY",
    "WRITTEN_KINDS",
    "is_pipeline_summary",
    "pipeline_kind",
    "pipeline_source",
    "summary_text",
]

METADATA_KEY = "context_pipeline"
"""Key in ``response_metadata`` under which the pipeline marks the messages it wrote."""

CONDENSED_TAG = "[CONTEXT CONDENSED — REFERENCE ONLY]"
"""The first line of every summary the pipeline writes."""

WRITTEN_KINDS = frozenset({"summary", "note"})
"""Kinds of whole messages the pipeline writes (a brief only rewrites a tool result)."""


def _mark(message: BaseMessage) -> dict[str, Any] | None:
    meta = message.response_metadata.get(METADATA_KEY)
    return meta if isinstance(meta, dict) else None


def pipeline_kind(message: BaseMessage) -> str | None:
    """Return what the pipeline wrote this message as (``"summary"``, ``"note"``), or None."""
    kind = (_mark(message) or {}).get("kind")
    return kind if isinstance(kind, str) else None


def is_pipeline_summary(message: Any) -> bool:
    """Return whether ``message`` is a summary this pipeline wrote.

    Only the pipeline's metadata mark counts: a message that merely starts with
    :data:`CONDENSED_TAG` is ordinary content.
    """
    return isinstance(message, BaseMessage) and pipeline_kind(message) == "summary"


def pipeline_source(message: BaseMessage) -> str | None:
    """Return who wrote a pipeline summary (``"model"`` or ``"digest"``), if known."""
    source = (_mark(message) or {}).get("source")
    return source if isinstance(source, str) else None


def summary_text(message: BaseMessage) -> str:
    """Return a pipeline summary's text without its tag line."""
    text = message_text(message)
    return text[len(CONDENSED_TAG) :].lstrip("\n") if text.startswith(CONDENSED_TAG) else text
