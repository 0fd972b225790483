"""The pipeline's settings: one frozen dataclass per stage, one source of defaults.

:class:`PipelineSettings` owns a :class:`PruneSettings` and a
:class:`CondenseSettings`; the pipeline builds it once and hands each stage its
own part. The LangGraph hook, the agent middleware and the command line take the
same object, or the same flat keywords (:meth:`PipelineSettings.from_keywords`),
so a default is written in exactly one place: here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_context_pipeline.errors import check_int
from langchain_context_pipeline.stages.briefs import BriefFunction
from langchain_context_pipeline.tokens.threshold import normalize_threshold, token_count

__all__ = [
    "CondenseSettings",
    "PipelineSettings",
    "PruneSettings",
    "override",
    "settings_or_model",
]

_Settings = Any

MARKER_ROOM = 40
"""Characters an assistant text's cut needs for its marker."""


@dataclass(frozen=True, kw_only=True)
class PruneSettings:
    """What the Pruner shortens outside the protected tail (sizes in characters)."""

    tool_output_limit: int = 500
    """An older tool result longer than this becomes a one-line brief."""
    tool_args_limit: int = 200
    """Each string inside an older tool call's arguments is cut to this."""
    assistant_text_limit: int = 2000
    """An older assistant text longer than this keeps only its head and tail."""
    assistant_keep_head: int = 800
    """Characters kept from the start of a cut assistant text."""
    assistant_keep_tail: int = 400
    """Characters kept from the end of a cut assistant text."""
    briefs: Mapping[str, BriefFunction] = field(default_factory=dict)
    """``{tool_name: fn(name, args, output) -> str}``: briefs for your own tools."""
    brief_names: bool = True
    """A built-in brief fills its line, up to ``tool_output_limit``, with the names its
    result holds (paths, file and dotted names, snake_case and CamelCase identifiers):
    the agent keeps what it saw, at a few dozen tokens a brief (see BENCHMARKS.md,
    "low_water" and the analysis's "Names in briefs"). Your own briefs are never
    changed."""

    def __post_init__(self) -> None:
        """Check the sizes.

        Raises:
            ValueError: for a size that is not an int >= 0, or keep sizes that leave no
                room for the marker.
            TypeError: for a brief that is not callable, or ``brief_names`` not a bool.
        """
        for f in dataclasses.fields(self):
            if f.name not in ("briefs", "brief_names"):
                check_int(f.name, getattr(self, f.name))
        if not isinstance(self.brief_names, bool):
            raise TypeError(f"brief_names must be a bool, got {self.brief_names!r}")
        keep = self.assistant_keep_head + self.assistant_keep_tail
        if keep + MARKER_ROOM > self.assistant_text_limit:
            raise ValueError(
                "assistant_keep_head + assistant_keep_tail must leave room for the marker: "
                f"{self.assistant_keep_head} + {self.assistant_keep_tail} + {MARKER_ROOM} > "
                f"assistant_text_limit={self.assistant_text_limit}"
            )
        if not isinstance(self.briefs, Mapping) or not all(
            callable(f) for f in self.briefs.values()
        ):
            raise TypeError("briefs must map tool names to callables (name, args, output) -> str")
        object.__setattr__(self, "briefs", dict(self.briefs))


@dataclass(frozen=True, kw_only=True)
class CondenseSettings:
    """How the Condenser asks for a summary, and how it treats a failing summarizer."""

    summary_ratio: float = 0.2
    """The summary's target size as a share of the tokens it replaces."""
    min_summary_tokens: int = 500
    """The smallest target size (a middle this small is not condensed)."""
    max_summary_tokens: int = 4000
    """The largest target size."""
    prompt: str | None = None
    """Instructions replacing the default; may use ``{max_tokens}``."""
    summary_timeout: float | None = 60.0
    """Seconds to wait for the summarizer (``None``: no limit)."""
    failure_limit: int = 3
    """After this many failed summaries in a row, the summarizer rests (0: never)."""
    cooldown_calls: int = 10
    """Condensations the digest serves while the summarizer rests."""

    def __post_init__(self) -> None:
        """Check the settings.

        Raises:
            ValueError: for inconsistent sizes, a bad timeout or an unusable prompt.
        """
        for name in ("min_summary_tokens", "max_summary_tokens", "failure_limit", "cooldown_calls"):
            check_int(name, getattr(self, name))
        ratio = self.summary_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
            raise ValueError(f"summary_ratio must be in (0, 1], got {ratio!r}")
        if not 1 <= self.min_summary_tokens <= self.max_summary_tokens:
            raise ValueError(
                "need 1 <= min_summary_tokens <= max_summary_tokens, got "
                f"{self.min_summary_tokens} and {self.max_summary_tokens}"
            )
        timeout = self.summary_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(f"summary_timeout must be positive or None, got {timeout!r}")
        if self.prompt is not None and not isinstance(self.prompt, str):
            raise TypeError(f"prompt must be a str or None, got {type(self.prompt).__name__}")
        try:
            self.instructions.format(max_tokens=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"prompt must be a str.format template using only {{max_tokens}}: {exc!r}"
            ) from exc

    @property
    def instructions(self) -> str:
        """The summarizer's instructions: ``prompt``, or the default."""
        from langchain_context_pipeline.stages.prompt import DEFAULT_INSTRUCTIONS

        return DEFAULT_INSTRUCTIONS if self.prompt is None else self.prompt

    def summary_budget(self, replaced_tokens: int) -> int:
        """Return the summary's target tokens for a middle of ``replaced_tokens``."""
        target = round(self.summary_ratio * replaced_tokens)
        return max(self.min_summary_tokens, min(self.max_summary_tokens, target))


DEFAULT_TAIL_CAP = 8000
"""The default ``tail_budget`` is ``min(DEFAULT_TAIL_CAP, threshold // 4)``."""

DEFAULT_LOW_WATER = 0.5
"""The default ``low_water``: the one place it is set (chosen by measurement, see
``BENCHMARKS.md``)."""


class _DerivedTail:
    """The default of ``tail_budget``: derived from the threshold (no number a caller gives)."""

    def __repr__(self) -> str:
        return "min(8000, threshold // 4)"


_DERIVED_TAIL: Any = _DerivedTail()


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """Every setting of the pipeline, validated once.

    Example:
        >>> settings = PipelineSettings(threshold=64000)
        >>> settings.tail_budget, settings.prune.tool_output_limit
        (8000, 500)
        >>> small = PipelineSettings.from_keywords(threshold=4000, tool_output_limit=300)
        >>> small.tail_budget, small.prune.tool_output_limit
        (1000, 300)
    """

    threshold: int = 32000
    """Compress only above this many tokens; the output is always at or under it.
    Given as an int or ``("tokens", n)``; a ``("fraction", share)`` of the agent
    model's window is resolved by the middleware and the hook, which know the model."""
    tail_budget: int = _DERIVED_TAIL
    """Tokens of newest messages kept verbatim by prune and condense (an int or
    ``("tokens", n)``); left out, it becomes ``min(8000, threshold // 4)``."""
    head_count: int = 2
    """The first N messages (the task), kept verbatim when they are whole units."""
    low_water: float = DEFAULT_LOW_WATER
    """Hysteresis: the share of the threshold a truncation brings a request down to.
    The prune boundary and the truncation cut move only when a request would
    overflow with them as they stand; then the oldest units older than the tail are
    pruned, down to ``low_water x threshold`` (or all of them) and, only when that is
    not enough (what fits once pruned is sent as it is), truncation drops the oldest
    turns down to ``low_water x threshold``, so the next turns append to an unchanged
    prefix that a provider's prompt cache reuses (1: truncation drops only what the
    threshold needs). With a summarizer, a summary takes the place of those turns
    (and of every other unit older than the tail, pruned): it is written only when
    pruning cannot bring the request under the threshold. Chosen by
    measurement: see ``BENCHMARKS.md``."""
    prune: PruneSettings = field(default_factory=PruneSettings)
    """The Pruner's settings."""
    condense: CondenseSettings = field(default_factory=CondenseSettings)
    """The Condenser's settings."""
    tail_derived: bool = field(default=False, init=False, compare=False)
    """Whether ``tail_budget`` was derived from the threshold (it then follows it)."""

    def __post_init__(self) -> None:
        """Resolve the tail default and check that the sizes agree.

        Raises:
            ValueError: for a size that is not a whole number in range, or
                ``tail_budget >= threshold``.
            TypeError: for a stage setting of the wrong type.
        """
        threshold = normalize_threshold(self.threshold)
        if not isinstance(threshold, int):
            raise ValueError(
                f"threshold={self.threshold!r} is a share of the agent model's window, "
                "which settings cannot know: give it to ContextPipelineMiddleware(threshold=...) "
                "or create_pre_model_hook(threshold=..., agent_model=...), or a token count here"
            )
        object.__setattr__(self, "threshold", threshold)
        if self.tail_budget is None or self.tail_budget is _DERIVED_TAIL:
            object.__setattr__(self, "tail_budget", min(DEFAULT_TAIL_CAP, self.threshold // 4))
            object.__setattr__(self, "tail_derived", True)
        object.__setattr__(self, "tail_budget", token_count(self.tail_budget, "tail_budget", 0))
        check_int("head_count", self.head_count, 0)
        low = self.low_water
        if isinstance(low, bool) or not isinstance(low, int | float) or not 0 < low <= 1:
            raise ValueError(f"low_water must be in (0, 1], got {low!r}")
        if self.tail_budget >= self.threshold:
            raise ValueError(
                f"tail_budget ({self.tail_budget}) must be smaller than threshold "
                f"({self.threshold})"
            )
        for name, kind in (("prune", PruneSettings), ("condense", CondenseSettings)):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"{name} must be a {kind.__name__}")

    def __repr__(self) -> str:
        """Show every field (the stage settings' own reprs are long: see them apart)."""
        return (
            f"PipelineSettings(threshold={self.threshold}, tail_budget={self.tail_budget}, "
            f"head_count={self.head_count}, low_water={self.low_water}, prune=..., condense=...)"
        )

    @classmethod
    def from_keywords(
        cls, base: PipelineSettings | None = None, /, **keywords: Any
    ) -> PipelineSettings:
        """Build settings from flat keywords (``threshold=``, ``tool_output_limit=``, ...).

        Each keyword goes to the stage that owns it; the rest come from ``base``
        (or the defaults). Leaving ``tail_budget`` out keeps it derived from the
        threshold.

        Raises:
            TypeError: naming an unknown keyword.
        """
        base = base or cls()
        own = {f.name for f in dataclasses.fields(cls)} - {"prune", "condense"}
        prune_names = {f.name for f in dataclasses.fields(PruneSettings)}
        condense_names = {f.name for f in dataclasses.fields(CondenseSettings)}
        unknown = sorted(set(keywords) - own - prune_names - condense_names)
        if unknown:
            known = sorted(own | prune_names | condense_names)
            raise TypeError(f"unknown setting(s) {unknown}; known settings: {', '.join(known)}")
        top = {k: v for k, v in keywords.items() if k in own}
        if top.get("tail_budget") is None and ("tail_budget" in top or base.tail_derived):
            top["tail_budget"] = _DERIVED_TAIL
        prune = {k: v for k, v in keywords.items() if k in prune_names}
        condense = {k: v for k, v in keywords.items() if k in condense_names}
        return dataclasses.replace(
            base,
            **top,
            prune=dataclasses.replace(base.prune, **prune) if prune else base.prune,
            condense=dataclasses.replace(base.condense, **condense) if condense else base.condense,
        )

    def with_threshold(self, threshold: int) -> PipelineSettings:
        """Return these settings for another threshold (a derived tail follows it).

        An explicit tail that does not fit under the new threshold (one call budgeted
        lower by calibration or an overflow retry) shrinks in proportion to it.
        """
        if threshold == self.threshold:
            return self
        if self.tail_derived or self.tail_budget < threshold:
            return PipelineSettings.from_keywords(self, threshold=threshold)
        tail = self.tail_budget * threshold // self.threshold
        return PipelineSettings.from_keywords(self, threshold=threshold, tail_budget=tail)


def settings_or_model(
    first: Any, model: Any, also: str = ""
) -> tuple[PipelineSettings | None, Any]:
    """Return ``(settings, summarizer)`` from a first positional argument and ``model=``.

    The first argument may be :class:`PipelineSettings`, or the summarizer itself
    (a chat model, Runnable, callable, ``"provider:model"`` name or ``DIGEST``), as
    LangChain's ``SummarizationMiddleware(model)`` takes it.

    Args:
        first: the first positional argument.
        model: the ``model=`` argument.
        also: what else the caller takes there, for the error (``"a ContextPipeline, "``).

    Raises:
        TypeError: when the first argument is neither, or a summarizer is given twice.
    """
    if first is None or isinstance(first, PipelineSettings):
        return first, model
    from langchain_core.runnables import Runnable

    from langchain_context_pipeline.stages.digest import DIGEST

    if not (first is DIGEST or isinstance(first, str | Runnable) or callable(first)):
        raise TypeError(
            f"the first argument must be {also}PipelineSettings or the summarizer (a chat "
            "model, Runnable, callable, 'provider:model' name or DIGEST), got "
            f"{type(first).__name__}"
        )
    if model is not None:
        raise TypeError(
            f"the summarizer was given twice: positionally ({type(first).__name__}) and "
            f"as model= ({type(model).__name__})"
        )
    return None, first


def override(settings: _Settings, owner: str, keywords: Mapping[str, Any]) -> _Settings:
    """Return stage ``settings`` with ``keywords`` replacing fields of the same name.

    Raises:
        TypeError: naming ``owner`` and each keyword that is not a field.
    """
    if not keywords:
        return settings
    known = {f.name for f in dataclasses.fields(settings)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(f"unknown {owner} setting(s) {unknown}; known: {sorted(known)}")
    return dataclasses.replace(settings, **keywords)
