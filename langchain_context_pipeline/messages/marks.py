"""The pipeline's marks: how it recognises the messages it wrote itself.

A summary or a removal note is a ``HumanMessage`` carrying
``response_metadata["context_pipeline"]`` with its ``kind`` and a signature: an
HMAC-SHA256, under a key the pipeline holds, over the kind, the message id, the
text and every other field of the mark. Metadata alone proves nothing (a tool can
return a ``ToolMessage`` with any metadata, a user or another graph node can write
any message): a mark whose signature does not verify, or that sits on another
message type, is ordinary content. So is a message that merely starts with
:data:`CONDENSED_TAG`.

The signature is what makes a mark found among the *messages* trustworthy, since
tools, users and other nodes write messages. A summary the LangGraph hook or the
agent middleware kept in their private state key needs none: only graph code
writes that key (see :meth:`.CarriedSummary.from_state`), so it is trusted by
where it is and signed again here (:func:`vouched_mark`) for the pass that uses it.

The key is random per process unless ``CONTEXT_PIPELINE_MARK_KEY`` is set (or
:func:`set_mark_key` is called). The carried summary does not need it across
restarts or workers; set it to one secret on every worker for what is found in
messages alone: removal notes written into ``messages`` (the hook's persist
mode) and summaries a :class:`~.summary_memory.SummaryMemory` shares through a
store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_pipeline.messages.anatomy import message_text

__all__ = [
    "CONDENSED_TAG",
    "MARK_KEY_ENV",
    "METADATA_KEY",
    "SIGNATURE_FIELD",
    "WRITTEN_KINDS",
    "is_pipeline_summary",
    "pipeline_kind",
    "pipeline_mark",
    "pipeline_source",
    "set_mark_key",
    "summary_text",
    "vouched_mark",
]

METADATA_KEY = "context_pipeline"
"""Key in ``response_metadata`` under which the pipeline marks the messages it wrote."""

CONDENSED_TAG = "[CONTEXT CONDENSED — REFERENCE ONLY]"
"""The first line of every summary the pipeline writes."""

WRITTEN_KINDS = frozenset({"summary", "note"})
"""Kinds of whole messages the pipeline writes and signs (a brief only rewrites a
tool result, and is trusted for nothing)."""

MARK_KEY_ENV = "CONTEXT_PIPELINE_MARK_KEY"
"""Environment variable holding the key that signs the pipeline's marks."""

SIGNATURE_FIELD = "sig"
"""The field of a mark that holds its signature."""

_SIGNATURE = SIGNATURE_FIELD
_PROCESS_KEY = secrets.token_bytes(32)
_key_override: bytes | None = None


def set_mark_key(key: str | bytes | None) -> None:
    """Set the key that signs and verifies the pipeline's marks in this process.

    Workers need the same key only for marks read from messages (see the module
    docstring): the summary carried in graph state is trusted without it.
    ``None`` goes back to ``CONTEXT_PIPELINE_MARK_KEY``, or to this process's
    random key when that is not set.

    Raises:
        ValueError: for an empty key.
        TypeError: for a key that is not ``str``, ``bytes`` or ``None``.
    """
    global _key_override
    if key is None:
        _key_override = None
        return
    if not isinstance(key, str | bytes):
        raise TypeError(f"the mark key must be str or bytes, got {type(key).__name__}")
    if not key:
        raise ValueError("the mark key must not be empty")
    _key_override = key.encode("utf-8") if isinstance(key, str) else bytes(key)


def _key() -> bytes:
    if _key_override is not None:
        return _key_override
    env = os.environ.get(MARK_KEY_ENV)
    return env.encode("utf-8") if env else _PROCESS_KEY


def _signature(fields: dict[str, Any], message_id: str | None, content: str) -> str:
    payload = json.dumps(
        [fields, message_id, content], sort_keys=True, ensure_ascii=False, default=repr
    )
    digest = hmac.new(_key(), payload.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return digest.hexdigest()


def pipeline_mark(kind: str, content: str, message_id: str | None, **fields: Any) -> dict[str, Any]:
    """Return the ``response_metadata`` of a message the pipeline writes, signed.

    The signature covers ``kind``, every other field, the message id and the
    content: changing any of them, or copying the mark to another message,
    makes the mark an ordinary one.
    """
    mark = {"kind": kind, **fields}
    return {METADATA_KEY: {**mark, _SIGNATURE: _signature(mark, message_id, content)}}


def vouched_mark(
    kind: str, content: str, message_id: str | None, mark: Mapping[str, Any]
) -> dict[str, Any]:
    """Return ``mark`` signed again under this process's key, as :func:`pipeline_mark`.

    Only for a message whose origin vouches for it, never one read from the
    messages: the summary a private state key holds, which another process (under
    another key) may have signed. The old signature, whatever it is, is dropped.
    """
    fields = {k: v for k, v in mark.items() if k not in ("kind", _SIGNATURE)}
    return pipeline_mark(kind, content, message_id, **fields)


def _mark(message: BaseMessage) -> dict[str, Any] | None:
    meta = message.response_metadata.get(METADATA_KEY)
    return meta if isinstance(meta, dict) else None


def _verified(message: BaseMessage, mark: dict[str, Any]) -> bool:
    # Only the type the pipeline writes, with the content it writes (a string).
    if not isinstance(message, HumanMessage) or not isinstance(message.content, str):
        return False
    signature = mark.get(_SIGNATURE)
    if not isinstance(signature, str):
        return False
    fields = {k: v for k, v in mark.items() if k != _SIGNATURE}
    return hmac.compare_digest(signature, _signature(fields, message.id, message.content))


def pipeline_kind(message: BaseMessage) -> str | None:
    """Return what the pipeline wrote this message as (``"summary"``, ``"note"``, ...), or None.

    A summary or note counts only when its signature verifies (see the module
    docstring); anything else claiming to be one is ordinary content.
    """
    mark = _mark(message)
    kind = None if mark is None else mark.get("kind")
    if not isinstance(kind, str):
        return None
    if kind in WRITTEN_KINDS and not _verified(message, mark or {}):
        return None
    return kind


def is_pipeline_summary(message: Any) -> bool:
    """Return whether ``message`` is a summary this pipeline wrote.

    Only the pipeline's signed mark counts: a message that merely starts with
    :data:`CONDENSED_TAG`, or carries a copied or edited mark, is ordinary content.
    """
    # A summary verifies only as a HumanMessage (see _verified): others are not read.
    return isinstance(message, HumanMessage) and pipeline_kind(message) == "summary"


def pipeline_source(message: BaseMessage) -> str | None:
    """Return who wrote a pipeline summary (``"model"`` or ``"digest"``), if known."""
    if not is_pipeline_summary(message):
        return None
    source = (_mark(message) or {}).get("source")
    return source if isinstance(source, str) else None


def summary_text(message: BaseMessage) -> str:
    """Return a pipeline summary's text without its tag line."""
    text = message_text(message)
    return text[len(CONDENSED_TAG) :].lstrip("\n") if text.startswith(CONDENSED_TAG) else text
