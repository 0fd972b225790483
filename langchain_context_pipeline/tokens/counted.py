"""What the provider counted, and which model counted it.

A thread's calibration (:mod:`~langchain_context_pipeline.tokens.calibration`) keeps the
last requests the provider counted (:data:`Counted`: a prefix of the next request may
repeat one of them) and the runs of messages whose cost the difference of two reported
counts told apart (:data:`Span`: found again wherever they stand unchanged). Both come
back from graph state, where anything malformed reads as nothing. A count is used only
when it comes from the agent's own model (:func:`same_model`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from langchain_context_pipeline.tokens.prefix import span_digest

__all__ = [
    "SPAN_MARGIN",
    "Counted",
    "CutIds",
    "Span",
    "counted_of",
    "cut_ids_of",
    "model_identity",
    "pending_of",
    "reply_identity",
    "same_model",
    "span_credit",
    "span_of",
    "stored_list",
]

SPAN_MARGIN = 1.01
"""Applied to a counted span's reported tokens where it is found again."""

Counted = tuple[int, str, int, int]
"""A request the provider counted: ``(messages, digest, counted tokens, reported tokens)``."""

Span = tuple[str, str, int, int, int]
"""A run of messages the provider counted: ``(first message's digest, the run's digest,
messages, counted tokens, reported tokens)``. When a request repeats a counted one and
adds messages, the difference of the two reported counts is what the added messages
cost the provider, wherever they stand later."""


def model_identity(model: Any) -> tuple[str | None, str | None]:
    """Return ``(provider, model name)`` of a chat model, as LangSmith names them."""
    try:
        params = model._get_ls_params()
    except Exception:  # not a chat model, or one that cannot say
        return None, None
    provider = params.get("ls_provider")
    name = params.get("ls_model_name")
    return (provider if isinstance(provider, str) else None), (
        name if isinstance(name, str) else None
    )


def reply_identity(reply: BaseMessage) -> tuple[str | None, str | None]:
    """Return ``(provider, model name)`` of the model that wrote ``reply``."""
    meta = reply.response_metadata or {}
    provider = meta.get("model_provider")
    name = meta.get("model_name") or meta.get("model")
    return (provider if isinstance(provider, str) else None), (
        name if isinstance(name, str) else None
    )


_FAMILIES: dict[str, str] = {
    "azure": "openai",
    "azure_openai": "openai",
    "openai-codex": "openai",
    "openai-mantle": "openai",
    "anthropic-bedrock": "anthropic",
    "anthropic-mantle": "anthropic",
    "amazon_bedrock": "bedrock",
    "bedrock_converse": "bedrock",
    "mistral": "mistralai",
}
"""A model's provider as LangSmith names it (``_get_ls_params``), or its replies'
provider (``response_metadata["model_provider"]``), and the family both belong to,
where the two names differ: langchain-openai's Azure and Codex models and
langchain-aws's OpenAI and Anthropic hostings answer as ``"openai"`` /
``"anthropic"``; langchain-aws's Bedrock models are ``"amazon_bedrock"`` and answer as
``"bedrock_converse"`` (``ChatBedrockConverse``) or ``"bedrock"`` (``ChatBedrock``);
langchain-mistralai's are ``"mistral"`` and answer as ``"mistralai"``."""

_NAMED_BY_USER = frozenset({"azure", "azure_openai"})
"""Providers whose model name is a deployment's, chosen by the user: langchain-openai's
Azure replies name the model they ran (``"gpt-4o-2024-08-06"``) whatever the
deployment is called, so the names are not compared."""

_ALIASES = ("-latest", "-0")
"""Endings of a model alias that the provider resolves to a dated snapshot
(``"claude-3-7-sonnet-latest"``, ``"claude-sonnet-4-0"``): the reply names the snapshot."""

_HOSTED_ID = re.compile(
    r"^(?:(?:us|eu|apac|jp|au|ca|us-gov|global)\.)?"
    r"(?:anthropic|meta|mistral|amazon|cohere|ai21|deepseek|openai|qwen|writer)\."
    r"(?P<model>.+?)(?:-v\d+(?::\d+)?|-\d+:\d+)?$"
)
"""A Bedrock model id: an optional cross-region prefix, the vendor, the model, a version
(``"us.anthropic.claude-sonnet-4-20250514-v1:0"``); the model alone is compared, so a
reply that names it as its vendor does (``"claude-sonnet-4-20250514"``) is the same."""


def _family(provider: str) -> str:
    """The family of a provider's name (see :data:`_FAMILIES`)."""
    return _FAMILIES.get(provider, provider)


def _bare(name: str) -> str:
    """A model name without a Bedrock id's region, vendor and version (see :data:`_HOSTED_ID`)."""
    hosted = _HOSTED_ID.match(name)
    return hosted.group("model") if hosted else name


def same_model(agent: tuple[str | None, str | None], reply: tuple[str | None, str | None]) -> bool:
    """Whether a reply's model is the agent's.

    The providers are compared by family (:data:`_FAMILIES`: an Azure deployment, a
    Bedrock or a Mistral model answers under another provider name than its own). A
    dated snapshot (``"gpt-4o-2024-08-06"``, ``"claude-sonnet-4-20250514"``) answers for
    its alias (``"gpt-4o"``, ``"claude-sonnet-4-0"``, ``"...-latest"``), a model for its
    Bedrock id; an Azure deployment answers for its provider's replies, whatever it is
    named. A model whose name only begins with the agent's is another model
    (``"gpt-4o"`` for ``"gpt-4"``, ``"gpt-4o-mini"`` for ``"gpt-4o"``).
    """
    provider = agent[0].lower() if agent[0] else None
    if provider and reply[0] and _family(provider) != _family(reply[0].lower()):
        return False
    if provider in _NAMED_BY_USER:
        return True  # a deployment's name is the user's, not the model's
    if not agent[1] or not reply[1]:
        return True
    name, replied = _bare(agent[1]), _bare(reply[1])
    stem = next((name[: -len(end)] for end in _ALIASES if name.endswith(end)), name)
    if _snapshot_of(replied, stem) or _snapshot_of(name, replied):
        return True
    # An alias may also leave out the version the reply names ("gemini-flash-latest"
    # answered by "gemini-2.5-flash"): its words, in order, among the reply's, whose
    # other words are versions ("2.5"; not "lite", another model).
    words, among = stem.split("-"), replied.split("-")
    return (
        stem != name
        and _in_order(words, among)
        and all(_VERSION.search(word) for word in among if word not in words)
    )


_SNAPSHOT = re.compile(r"(?:[-@]\d[\w.:-]*|:[\w.:-]+)?")
"""What a snapshot adds to its model's name: nothing, a date or a version after a dash
or an at (``"-2024-08-06"``, ``"-20250514"``, ``"-002"``), or a tag after a colon
(``":8b"``). Not a word: ``"gpt-4o"`` is not ``"gpt-4"``, nor ``"gpt-4o-mini"``
``"gpt-4o"`` (another model, maybe another tokenizer, whose counts would mislead)."""

_VERSION = re.compile(r"\d")
"""A word of a model name that is a version: it holds a digit."""


def _snapshot_of(name: str, base: str) -> bool:
    """Whether ``name`` is the model ``base`` names, or a dated snapshot or tag of it."""
    return name.startswith(base) and _SNAPSHOT.fullmatch(name, len(base)) is not None


def _in_order(words: list[str], among: list[str]) -> bool:
    """Whether ``words`` occur in ``among`` in the same order (not necessarily adjacent)."""
    rest = iter(among)
    return all(word in rest for word in words)


def _naturals(*values: Any) -> bool:
    return all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in values)


def counted_of(value: Any) -> Counted | None:
    """Read a counted request from its stored form; anything else is none."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 4:
        return None
    n, digest, counted, reported = value
    if not _naturals(n, counted, reported):
        return None
    return (n, digest, counted, reported) if isinstance(digest, str) else None


def span_of(value: Any) -> Span | None:
    """Read a counted span from its stored form; anything else (or an empty run) is none."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 5:
        return None
    first, digest, n, counted, reported = value
    if not (isinstance(first, str) and isinstance(digest, str) and _naturals(n, counted, reported)):
        return None
    return (first, digest, n, counted, reported) if n > 0 else None


def pending_of(value: Any) -> tuple[int, str] | None:
    """Read the request awaiting a count (messages, digest) from its stored form; else none."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    n, digest = value
    return (n, digest) if _naturals(n) and isinstance(digest, str) else None


_T = TypeVar("_T")


def stored_list(read: Callable[[Any], _T | None], value: Any, keep: int) -> tuple[_T, ...]:
    """Read a stored list with ``read``: its newest ``keep`` readable entries, oldest first."""
    entries = value if isinstance(value, list) else ()
    return tuple(entry for entry in map(read, entries) if entry is not None)[-keep:]


CutIds = tuple[str | None, str | None, int | None]
"""Carried cuts: the last pruned and the last dropped message's ids, and the size of
the removal note's index where the drop stands (each may be ``None``)."""


def cut_ids_of(value: Any) -> CutIds | None:
    """Read carried cuts (two ids, and optionally the note's index size); else none."""
    if not isinstance(value, list | tuple) or len(value) not in (2, 3):
        return None
    first, second = value[0], value[1]
    index = value[2] if len(value) == 3 else None
    if not all(v is None or isinstance(v, str) for v in (first, second)):
        return None
    if index is not None and (type(index) is not int or index < 0):
        return None
    return first, second, index


def span_credit(
    spans: Sequence[Span], message_digests: Sequence[str], start: int
) -> tuple[int, int]:
    """Counted and reported tokens of the ``spans`` found in ``message_digests[start:]``.

    Each span is taken where its messages stand unchanged and in order, the longest
    first, none overlapping. What the provider reported is raised by
    :data:`SPAN_MARGIN` and one token per message: a message may cost a little more
    where it now stands (a provider that merges neighbouring turns).

    Example:
        >>> from langchain_core.messages import BaseMessage

    from langchain_context_pipeline.tokens.prefix import span_digest
        >>> run = ("a", span_digest(["a", "b"]), 2, 300, 200)
        >>> span_credit([run], ["x", "a", "b", "y"], 0)
        (300, 204)
    """
    if not spans:
        return 0, 0
    by_first: dict[str, list[Span]] = {}
    for sp in spans:
        by_first.setdefault(sp[0], []).append(sp)
    counted = reported = 0
    i = start
    while i < len(message_digests):
        found: Span | None = None
        for sp in by_first.get(message_digests[i], ()):
            n = sp[2]
            if found is not None and n <= found[2]:
                continue
            if i + n <= len(message_digests) and (span_digest(message_digests[i : i + n]) == sp[1]):
                found = sp
        if found is None:
            i += 1
            continue
        counted += found[3]
        reported += math.ceil(found[4] * SPAN_MARGIN) + found[2]
        i += found[2]
    return counted, reported
