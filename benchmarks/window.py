"""What the model gets of its window: fill in real tokens, next-step retention, usage runs.

- **Window fill**: at every request whose history is over the window (by cl100k_base,
  as the real-token counter counts a request), the request's cl100k size as a share
  of the window; its mean and 10th percentile per strategy.
- **Next-step retention**: the identifiers (paths, file names, snake_case and
  CamelCase names, dotted names, numbers of two digits or more) in the agent's real
  next message (its text and tool-call arguments) that occur in the history it was
  sent, and the share of them still in the request. What the agent used next is
  what it needed; a request that lost it made the agent guess or read it again.
- **Usage runs**: the middleware (``ContextPipelineMiddleware.wrap_model_call``,
  its state carried) driven with replies whose ``usage_metadata["input_tokens"]``
  is the request's true count by one tokenizer (cl100k_base; Qwen 3 for one run),
  as a provider reports it in its own tokens. Such a run is held to that tokenizer:
  a request that fills a cl100k provider's window is not meant to fit Qwen 3's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph.message import add_messages

from benchmarks.fake import FakeSummarizer
from benchmarks.real_tokens import REPLY_PRIMING, load_tokenizers
from benchmarks.strategies import OursDefault, Strategy, _split_system, model_request
from benchmarks.texts import fingerprint, strings
from langchain_context_pipeline import ContextPipeline, exact_token_counter
from langchain_context_pipeline.langgraph import DEFAULT_SUMMARY_KEY, create_pre_model_hook
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.tokens.counters import MESSAGE_OVERHEAD_TOKENS, countable_parts

IDENTIFIER = re.compile(
    r"(?:[\w.-]*/)+[\w.-]+"  # paths
    r"|\b\w+\.[A-Za-z]\w{0,7}\b"  # file names and dotted names
    r"|\b[a-z]+(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b[a-z]+(?:[A-Z][a-z0-9]*)+\b"  # CamelCase
    r"|\b\d{2,}(?:\.\d+)?\b"  # numbers
)
"""What next-step retention looks for in the agent's next message."""


def identifiers(message: BaseMessage) -> set[str]:
    """The identifiers of a message's text and tool-call arguments."""
    parts = (
        [message.content] if isinstance(message.content, str) else list(strings(message.content))
    )
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            parts += list(strings(call.get("args")))
    return {m for text in parts for m in IDENTIFIER.findall(text) if len(m) >= 3}


def next_step(next_message: BaseMessage, history_hay: str, request_hay: str) -> tuple[int, int]:
    """Return (kept, total): identifiers of the next message in the request, in the history."""
    used = [i for i in identifiers(next_message) if i in history_hay]
    return sum(1 for i in used if i in request_hay), len(used)


class TrueCount:
    """A request's true count by one tokenizer, as ``benchmarks.real_tokens`` counts it."""

    _cache: ClassVar[dict[tuple[str, Any], int]] = {}
    _counters: ClassVar[dict[str, Any]] = {}

    @classmethod
    def count(cls, messages: Sequence[BaseMessage], name: str = "cl100k_base") -> int:
        counter = cls._counters.get(name)
        if counter is None:
            counter = cls._counters[name] = load_tokenizers([name])[name]
        total = REPLY_PRIMING
        for message in messages:
            key = (name, fingerprint(message))
            n = cls._cache.get(key)
            if n is None:
                texts, fixed = countable_parts(message)
                n = sum(counter(t) for t in texts) + fixed + MESSAGE_OVERHEAD_TOKENS
                cls._cache[key] = n
            total += n
        return total


class _MiddlewareUsage(Strategy):
    """The middleware with its state carried, its model reporting true cl100k usage."""

    ours = True
    summarizer = True
    reports_in = "cl100k_base"
    """The tokenizer the stub provider reports usage in (and the run is held to)."""
    low_water: float | None = None
    """The middleware's ``low_water`` (``None``: its default)."""
    brief_names: bool = True
    """The middleware's ``brief_names``."""

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.middleware = ContextPipelineMiddleware(
            threshold=window,
            tail_budget=self.tail,
            model=fake if self.summarizer else None,
            recall_tool=False,
            brief_names=self.brief_names,
            **({} if self.low_water is None else {"low_water": self.low_water}),
        )
        self.state: dict[str, Any] = {}
        self.captured: list[BaseMessage] = []

    def start(self) -> None:
        super().start()
        self.state = {}

    def _handler(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        system = [request.system_message] if request.system_message is not None else []
        self.captured = [*system, *request.messages]
        tokens = TrueCount.count(self.captured, self.reports_in)
        reply = AIMessage("", response_metadata={"model_name": "replay"})
        reply.usage_metadata = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
        return ModelResponse(result=[reply])

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        system, rest = _split_system(history)
        request = model_request(self.fake, rest, system, **self.state)
        out = self._timed(lambda: self.middleware.wrap_model_call(request, self._handler))
        if isinstance(out, ExtendedModelResponse) and out.command is not None:
            update = out.command.update
            if isinstance(update, dict):
                if update.get("context_pipeline_summary") is not None:
                    self.summaries += 1
                self.state.update(update)
        return self.captured

    def describe(self) -> str:
        model = "fake" if self.summarizer else "None"
        return (
            f"`ContextPipelineMiddleware(threshold={self.window}, tail_budget={self.tail}, "
            f"model={model})`.wrap_model_call, its state carried; every reply reports the "
            f"request's true {self.reports_in} count in `usage_metadata['input_tokens']`"
        )


class OursCondenseUsage(_MiddlewareUsage):
    key = "ours_condense_usage"
    label = "ours: prune + condense, usage reported (cl100k)"
    summarises = True


class OursDefaultUsage(_MiddlewareUsage):
    key = "ours_default_usage"
    label = "ours: default, usage reported (cl100k)"
    summarizer = False


class OursDefaultUsageQwen3(OursDefaultUsage):
    key = "ours_default_usage_qwen3"
    label = "ours: default, usage reported in Qwen 3 tokens"
    reports_in = "qwen3"


class OursHookUsage(Strategy):
    """The pre-model hook (ephemeral mode), its state carried, its model reporting true usage.

    The history is handed to the hook as a graph state holds it, each reply the
    transcript's AIMessage with the true cl100k count of the request before it in
    ``usage_metadata["input_tokens"]``; the hook finds that reply in the history itself,
    after the last message of the request it recorded.
    """

    key = "ours_hook_usage"
    label = "ours: hook (prune + condense), usage reported (cl100k)"
    ours = True
    summarises = True
    reports_in = "cl100k_base"
    """The tokenizer the stub provider reports usage in (and the run is held to)."""

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.hook = create_pre_model_hook(threshold=window, tail_budget=self.tail, model=fake)
        self.state: dict[str, Any] = {}
        self.replies: dict[int, AIMessage] = {}
        """The transcript's replies, at their index, with the usage they reported."""
        self.sent: tuple[int, int] | None = None
        """Where the last request's history ended, and its true count."""

    def start(self) -> None:
        super().start()
        self.state, self.replies, self.sent = {}, {}, None

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        if self.sent is not None:
            end, tokens = self.sent
            reply = history[end] if end < len(history) else None
            if isinstance(reply, AIMessage):
                usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
                self.replies[end] = reply.model_copy(update={"usage_metadata": usage})
        messages = [self.replies.get(i, m) for i, m in enumerate(history)]
        update = self._timed(lambda: self.hook.invoke({**self.state, "messages": messages}))
        request: list[BaseMessage] = update.pop("llm_input_messages")
        if update.get(DEFAULT_SUMMARY_KEY) is not None:
            self.summaries += 1
        self.state.update(update)
        self.sent = (len(history), TrueCount.count(request, self.reports_in))
        return request

    def describe(self) -> str:
        return (
            f"`create_pre_model_hook(threshold={self.window}, tail_budget={self.tail}, "
            "model=fake)`.invoke(state), its state carried; each reply in the history reports "
            "the true cl100k count of the request before it in `usage_metadata['input_tokens']`"
        )


class OursPersistUsage(Strategy):
    """The pre-model hook in persist mode, its model reporting true usage.

    The hook's state is carried as a graph applies its updates (``add_messages``): the
    history it rewrote, then each turn's new messages, the reply with the true cl100k
    count of the request before it. The request is the state's ``messages``.
    """

    key = "ours_persist_usage"
    label = "ours: hook, persist mode (prune + condense), usage reported (cl100k)"
    ours = True
    summarises = True
    reports_in = "cl100k_base"

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.hook = create_pre_model_hook(
            threshold=window, tail_budget=self.tail, model=fake, mode="persist"
        )
        self.state: dict[str, Any] = {"messages": []}
        self.sent: int | None = None
        """The true count of the last request."""

    def start(self) -> None:
        super().start()
        self.state, self.sent = {"messages": []}, None

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        # Copies: add_messages gives an id to a message without one, in place, and the
        # transcript's messages serve every strategy.
        added = [m.model_copy() for m in new]
        if self.sent is not None and added and isinstance(added[0], AIMessage):
            usage = {"input_tokens": self.sent, "output_tokens": 0, "total_tokens": self.sent}
            added[0] = added[0].model_copy(update={"usage_metadata": usage})
        self.state["messages"] = add_messages(self.state["messages"], added)
        update = self._timed(lambda: self.hook.invoke(self.state))
        if "messages" in update:
            self.state["messages"] = add_messages(self.state["messages"], update.pop("messages"))
        if update.get(DEFAULT_SUMMARY_KEY) is not None:
            self.summaries += 1
        self.state.update(update)
        request: list[BaseMessage] = list(self.state["messages"])
        self.sent = TrueCount.count(request, self.reports_in)
        return request

    def describe(self) -> str:
        return (
            f"`create_pre_model_hook(threshold={self.window}, tail_budget={self.tail}, "
            'model=fake, mode="persist")`.invoke(state), its updates applied by '
            "`add_messages`; each reply reports the true cl100k count of the request before it"
        )


class OursDefaultExact(OursDefault):
    """The default pipeline counting with the agent model's own tokenizer (cl100k_base).

    What ``token_counter="exact"`` gives the hook or the middleware of a ``gpt-4``
    agent (``exact_token_counter("gpt-4")``: tiktoken's cl100k_base, 4 tokens of
    framing a message and 3 of reply priming a request): no usage reported, an
    exact count instead of the conservative estimate. Held to cl100k_base.
    """

    key = "ours_default_exact"
    label = "ours: default, exact counter (cl100k)"
    own_counter = "cl100k_base"
    reports_in = "cl100k_base"
    """The tokenizer the run counts with, and is held to."""

    def _build(self) -> ContextPipeline:
        return ContextPipeline(
            threshold=self.window,
            tail_budget=self.tail,
            token_counter=exact_token_counter("gpt-4"),
        )

    def describe(self) -> str:
        return (
            f"`ContextPipeline(threshold={self.window}, tail_budget={self.tail}, "
            'token_counter=exact_token_counter("gpt-4"))`.compress(history, '
            "carried_summary=carried) (model=None; tiktoken's cl100k_base)"
        )


USAGE_STRATEGIES: tuple[type[Strategy], ...] = (
    OursCondenseUsage,
    OursHookUsage,
    OursPersistUsage,
    OursDefaultUsage,
    OursDefaultUsageQwen3,
    OursDefaultExact,
)
"""The runs held to one provider's tokenizer: the usage-reporting runs of the
middleware and of the hook, and the default pipeline with an exact cl100k counter."""


LOW_WATER_GRID = (0.4, 0.5, 0.6, 0.7, 0.85, 1.0)
"""The ``low_water`` values the full run replays the default pipeline and the hook path at."""


def low_water_strategies(values: Sequence[float] = LOW_WATER_GRID) -> list[type[Strategy]]:
    """The default pipeline, the hook path (prune + condense) and the default with
    usage reported (the middleware), at each ``low_water``; and each at the default
    ``low_water`` with ``brief_names=False``."""
    from benchmarks.strategies import OursCondense, OursDefault
    from langchain_context_pipeline import ContextPipeline
    from langchain_context_pipeline.stages.settings import DEFAULT_LOW_WATER

    points = [(value, True) for value in values] + [(DEFAULT_LOW_WATER, False)]

    def suffix(value: float, names: bool) -> str:
        return f"@{value:g}" + ("" if names else "-no-names")

    def label(value: float, names: bool) -> str:
        return f", low_water={value:g}" + ("" if names else ", brief_names=False")

    out: list[type[Strategy]] = []
    for value, names in points:
        attributes = {
            "key": OursDefaultUsage.key + suffix(value, names),
            "label": OursDefaultUsage.label + label(value, names),
            "low_water": value,
            "brief_names": names,
            "base_key": OursDefaultUsage.key,
        }
        out.append(type("OursDefaultUsageLowWater", (OursDefaultUsage,), attributes))
    for base in (OursDefault, OursCondense):
        for value, names in points:

            def build(
                self: Any,
                value: float = value,
                names: bool = names,
                condense: bool = base is OursCondense,
            ) -> Any:
                model = self.fake if condense else None
                return ContextPipeline(
                    threshold=self.window,
                    tail_budget=self.tail,
                    model=model,
                    low_water=value,
                    brief_names=names,
                )

            attributes = {
                "key": base.key + suffix(value, names),
                "label": base.label + label(value, names),
                "_build": build,
                "low_water": value,
                "brief_names": names,
                "base_key": base.key,
            }
            out.append(type(base.__name__ + "LowWater", (base,), attributes))
    return out


# -- targets and report (issue "Use the window it is given") ------------------------------

FILL_WITH_USAGE = 0.85
FILL_WITHOUT_USAGE = 0.65
NEXT_STEP = {"32000": 0.95, "16000": 0.92}
HELD = {
    "ours_default": "ours_default_usage",
    "ours_condense": "ours_condense_usage",
}
"""Each plain configuration held to the fill targets, and its usage-reporting run."""
EXACT = ("ours_default_exact",)
"""Runs without usage that count with the provider's tokenizer: held to the fill target
without usage, to next-step retention, and to no overflow by that tokenizer."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def window_targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for the window targets: fill with and without usage, next-step retention."""
    from benchmarks.targets import _row

    rows: list[dict[str, Any]] = []
    config = out["config"]["strategies"]
    for window, data in out["windows"].items():
        label = f"{int(window) // 1000}k"
        totals = data["totals"]
        # Each configuration without usage, then its usage run if it has one; the last
        # of them is the run held to its provider's tokenizer.
        held = [(plain, [plain, usage]) for plain, usage in HELD.items()]
        held += [(exact, [exact]) for exact in EXACT]
        for plain, runs in held:
            usage = runs[-1]
            for key, need in zip(runs, (FILL_WITHOUT_USAGE, FILL_WITH_USAGE), strict=False):
                if key not in totals:
                    continue
                fill = totals[key]["fill"]["mean"]
                rows.append(
                    _row(
                        "window fill (cl100k) at the turns over the window",
                        label,
                        config[key]["label"],
                        _pct(fill),
                        f">= {_pct(need)}",
                        fill is not None and fill >= need,
                        f"p10 {_pct(totals[key]['fill']['p10'])}",
                    )
                )
            held_to = config.get(usage, {}).get("reports_in")
            if usage in totals and held_to:
                over = (totals[usage].get("real_tokens") or {}).get("overflows", {}).get(held_to)
                if over is not None:
                    rows.append(
                        _row(
                            "0 overflows by the provider's tokenizer (usage reported, "
                            "or its exact count)",
                            label,
                            config[usage]["label"],
                            str(over),
                            "0",
                            over == 0,
                            held_to,
                        )
                    )
            bar = NEXT_STEP.get(window)
            share = totals[plain]["next_step"]["share"] if plain in totals else None
            if bar is not None and share is not None:
                rows.append(
                    _row(
                        "next-step retention",
                        label,
                        config[plain]["label"],
                        _pct(share),
                        f">= {_pct(bar)}",
                        share >= bar,
                        "SummarizationMiddleware "
                        + _pct(
                            totals.get("lc_summarization", {}).get("next_step", {}).get("share")
                        ),
                    )
                )
    return rows


def window_markdown(out: dict[str, Any]) -> list[str]:
    """Window fill and next-step retention of every strategy, per window."""
    config = out["config"]["strategies"]
    lines = [
        "At the requests whose history is over the window (by cl100k_base): the request's "
        "cl100k size as a share of the window (mean and 10th percentile). Next-step "
        "retention: of the identifiers (paths, file names, snake_case / CamelCase / dotted "
        "names, numbers) in the agent's real next message that occur in its history, the "
        "share still in the request. The `usage reported` runs are the middleware whose "
        "model reports each request's true count (cl100k, or Qwen 3 where named) as "
        "`input_tokens`; each is held to the tokenizer it reports in (its other "
        "real-overflow columns show what a request that fills a cl100k provider's window "
        "costs by another tokenizer, which no provider of that tokenizer would be sent). "
        "The `exact counter` run is the default pipeline counting with cl100k_base itself "
        '(`exact_token_counter("gpt-4")`, what `token_counter="exact"` gives a gpt-4 '
        "agent), no usage reported; it is held to cl100k_base the same way.",
        "",
    ]
    for window, data in out["windows"].items():
        rows = []
        for key, t in data["totals"].items():
            fill = t.get("fill") or {}
            nxt = t.get("next_step") or {}
            real = (t.get("real_tokens") or {}).get("overflows") or {}
            rows.append(
                [
                    config[key]["label"],
                    _pct(fill.get("mean")),
                    _pct(fill.get("p10")),
                    str(fill.get("samples", 0)),
                    _pct(nxt.get("share")),
                    " / ".join(str(n) for n in real.values()) or "n/a",
                ]
            )
        header = [
            "strategy",
            "fill mean",
            "fill p10",
            "requests over",
            "next-step retention",
            "real overflows ("
            + " / ".join(
                next(iter(data["totals"].values())).get("real_tokens", {}).get("overflows", {})
            )
            + ")",
        ]
        lines += [f"**{int(window) // 1000}k**", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    return lines


def low_water_markdown(out: dict[str, Any]) -> list[str]:
    """The ``low_water`` grid (and names in briefs off): cost, cached share, retention, fill."""
    grid = out.get("low_water")
    if not grid:
        return ["Not run (quick mode).", ""]
    lines: list[str] = []
    for window, points in grid.items():
        header = [
            "configuration",
            "low_water",
            "brief names",
            "cost vs none",
            "cached",
            "tool-arg retention",
            "next-step retention",
            "fill mean",
            "worst transcript (cost vs none)",
        ]
        lines += [f"**{int(window) // 1000}k**", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for t in points.values():
            worst = t.get("worst") or {}
            lines.append(
                "| "
                + " | ".join(
                    [
                        str(t["base"]),
                        f"{t['low_water']:g}",
                        "on" if t.get("brief_names", True) else "off",
                        _pct(t["cost_share"]),
                        _pct(t["cached_share"]),
                        _pct(t["retention"]["args"]),
                        _pct(t["next_step"]["share"]),
                        _pct(t["fill"]["mean"]),
                        f"{worst.get('transcript')} ({_pct(worst.get('cost_share'))})",
                    ]
                )
                + " |"
            )
        lines.append("")
    return lines
