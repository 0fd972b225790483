"""Each strategy turns the history an agent would send into the model's input.

Every strategy is replayed turn by turn with its state carried between turns the
way its own integration carries it:

- ours: ``ContextPipeline.compress(history, carried_summary=...)``, the running
  summary carried to the next turn exactly as the LangGraph hook does (the full
  history stays in the checkpoint; only the model input is compressed);
- ``SummarizationMiddleware``: its real ``before_model`` on the agent state, whose
  update is applied with LangGraph's ``add_messages`` reducer, so its summary
  replaces the history in the state from then on; ``create_agent`` keeps the
  system prompt out of the state and puts it in front of each request;
- ``ContextEditingMiddleware``: its real ``wrap_model_call`` around a handler that
  captures the edited request (the state keeps the full history);
- langmem: ``SummarizationNode`` on ``{"messages", "context"}``, its context (the
  running summary) carried; its ``summarized_messages`` is the model input;
- ``trim_messages``: a stateless call on the full history each turn.

``step`` returns the model input and stores the nanoseconds of the strategy's own
processing step (state bookkeeping that a graph does for it is not timed).
"""

from __future__ import annotations

import html
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.messages.utils import trim_messages

from benchmarks.fake import FakeSummarizer
from langchain_context_pipeline import ContextPipeline, Pruner, estimate_tokens
from langchain_context_pipeline.stages.carried import CarriedSummary

with warnings.catch_warnings():
    # The peers' imports emit deprecation warnings of their own dependencies
    # (langmem -> trustcall -> langgraph.constants); they are not ours to fail on.
    warnings.simplefilter("ignore")
    from langchain.agents.middleware import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )
    from langchain.agents.middleware.types import ModelRequest
    from langgraph.graph.message import add_messages
    from langmem.short_term import SummarizationNode


class Strategy:
    """A way to turn the history into the model input, replayed turn by turn."""

    key: str = ""
    label: str = ""
    ours: bool = False
    summarises: bool = False
    budgeted: bool = True
    """Whether the strategy promises to stay within the window."""
    own_counter: str | None = "estimate_tokens"
    """The token counter the strategy decides by (a key of ``real_tokens.OWN_COUNTERS``);
    None when it counts nothing."""

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        self.window = window
        self.tail = window // 4
        self.fake = fake
        self.last_ns = 0
        self.summaries = 0
        """Summaries written into the history so far (from the model or canned)."""

    def start(self) -> None:
        """Forget the state of the previous conversation."""
        self.summaries = 0

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        """Return the model input for ``history``; ``new`` is what was added since last turn."""
        raise NotImplementedError

    def _timed(self, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter_ns()
        out = fn()
        self.last_ns = time.perf_counter_ns() - start
        return out

    def describe(self) -> str:
        """Return the exact configuration, for the report."""
        return self.label

    def offloaded(self, model_input: list[BaseMessage]) -> str:
        """Text kept outside the request under a name ``model_input`` gives (none by default)."""
        return ""

    def evicts(self, tool: str, text: str) -> bool:
        """Whether the strategy's agent moves a tool result to a file it can read back."""
        return False


class NoManagement(Strategy):
    key = "none"
    label = "no management"
    budgeted = False
    own_counter = None

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        return self._timed(lambda: history)

    def describe(self) -> str:
        return "the full history every turn"


class OursPruneOnly(Strategy):
    key = "ours_prune"
    label = "ours: prune only"
    ours = True
    budgeted = False

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.pruner = Pruner(tail_budget=self.tail)

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        return self._timed(lambda: self.pruner.invoke(history))

    def describe(self) -> str:
        return f"`Pruner(tail_budget={self.tail}).invoke(history)` every turn (no budget)"


class _OursPipeline(Strategy):
    ours = True

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.pipeline = self._build()
        self.running: CarriedSummary | None = None
        self.all_reports: list[dict[str, Any]] = []
        """Every turn's CompressionReport, over every transcript replayed."""

    def _build(self) -> ContextPipeline:
        raise NotImplementedError

    def start(self) -> None:
        super().start()
        self.running = None

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        result = self._timed(lambda: self.pipeline.compress(history, carried_summary=self.running))
        self.running = result.carried_summary
        self.all_reports.append(result.report.as_dict())
        if result.report.summary_source is not None:
            self.summaries += 1
        return list(result.messages)


class OursCondense(_OursPipeline):
    key = "ours_condense"
    label = "ours: prune + condense"
    summarises = True

    def _build(self) -> ContextPipeline:
        return ContextPipeline(threshold=self.window, tail_budget=self.tail, model=self.fake)

    def describe(self) -> str:
        return (
            f"`ContextPipeline(threshold={self.window}, tail_budget={self.tail}, model=fake)`"
            ".compress(history, carried_summary=carried)"
        )


class OursChain(_OursPipeline):
    key = "ours_lcel"
    label = "ours: LCEL chain per turn"
    summarises = True

    def _build(self) -> ContextPipeline:
        return ContextPipeline(threshold=self.window, tail_budget=self.tail, model=self.fake)

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        # As ``prompt | pipeline | model`` does: the growing history, no carried summary;
        # one pipeline instance serves every transcript, as one chain serves every user.
        result = self._timed(lambda: self.pipeline.compress(history))
        self.all_reports.append(result.report.as_dict())
        if result.report.summary_source is not None:
            self.summaries += 1
        return list(result.messages)

    def describe(self) -> str:
        return (
            f"`ContextPipeline(threshold={self.window}, tail_budget={self.tail}, model=fake)`"
            " called on the growing history each turn with no carried summary, as "
            "`prompt | pipeline | model` calls it (one instance for every transcript)"
        )


class OursDefault(_OursPipeline):
    key = "ours_default"
    label = "ours: default (prune + truncate)"

    def _build(self) -> ContextPipeline:
        return ContextPipeline(threshold=self.window, tail_budget=self.tail)

    def describe(self) -> str:
        return (
            f"`ContextPipeline(threshold={self.window}, tail_budget={self.tail})`"
            ".compress(history, carried_summary=carried) (model=None)"
        )


def _split_system(messages: list[BaseMessage]) -> tuple[SystemMessage | None, list[BaseMessage]]:
    if messages and isinstance(messages[0], SystemMessage):
        return messages[0], messages[1:]
    return None, messages


def model_request(
    fake: Any, messages: list[BaseMessage], system: SystemMessage | None, **state: Any
) -> ModelRequest[Any]:
    """The request a middleware sees: ``messages`` in state too, beside ``state``'s keys."""
    from langchain.agents.middleware.types import ModelRequest

    return ModelRequest(
        model=fake,
        messages=list(messages),
        system_message=system,
        state={"messages": list(messages), **state},  # type: ignore[typeddict-item]
    )


class LCSummarization(Strategy):
    key = "lc_summarization"
    label = "SummarizationMiddleware"
    own_counter = "count_tokens_approximately"
    summarises = True

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.middleware: SummarizationMiddleware[Any, Any, Any] = SummarizationMiddleware(
            model=fake, trigger=("tokens", window), keep=("tokens", self.tail)
        )
        self.system: SystemMessage | None = None
        self.state: list[BaseMessage] = []
        self.started = False

    def start(self) -> None:
        super().start()
        self.system = None
        self.state = []
        self.started = False

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        if not self.started:
            self.system, new = _split_system(new)
            self.started = True
        self.state = add_messages(self.state, new)  # type: ignore[arg-type]
        update = self._timed(
            lambda: self.middleware.before_model({"messages": self.state}, None)  # type: ignore[arg-type, typeddict-item]
        )
        if update and update.get("messages"):
            self.state = add_messages(self.state, update["messages"])  # type: ignore[arg-type]
            self.summaries += 1
        return [self.system, *self.state] if self.system is not None else list(self.state)

    def describe(self) -> str:
        return (
            f'`SummarizationMiddleware(model=fake, trigger=("tokens", {self.window}), '
            f'keep=("tokens", {self.tail}))` (its default counter, '
            "`count_tokens_approximately`), `before_model` on the agent state, update "
            "applied with `add_messages`; system prompt outside the state as in `create_agent`"
        )


class LCContextEditing(Strategy):
    key = "lc_context_editing"
    label = "ContextEditingMiddleware"
    own_counter = "count_tokens_approximately"

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.middleware: ContextEditingMiddleware[Any, Any, Any] = ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=window, keep=3)]
        )
        self.captured: list[BaseMessage] = []

    def _handler(self, request: ModelRequest[Any]) -> AIMessage:
        system = [request.system_message] if request.system_message is not None else []
        self.captured = [*system, *request.messages]
        return AIMessage(content="")

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        system, rest = _split_system(history)
        request = model_request(self.fake, rest, system)
        self._timed(lambda: self.middleware.wrap_model_call(request, self._handler))
        return self.captured

    def describe(self) -> str:
        return (
            f"`ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger={self.window}, "
            "keep=3)])`, `wrap_model_call` around a capturing handler (approximate counter)"
        )


class LangmemSummarization(Strategy):
    key = "langmem"
    label = "langmem SummarizationNode"
    own_counter = "count_tokens_approximately"
    summarises = True

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        self.node = SummarizationNode(model=fake, max_tokens=window)
        self.context: dict[str, Any] = {}

    def start(self) -> None:
        super().start()
        self.context = {}

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        update = self._timed(
            lambda: self.node.invoke({"messages": history, "context": self.context})
        )
        if "context" in update:
            before = self.context.get("carried_summary")
            self.context = update["context"]
            if self.context.get("carried_summary") is not before:
                self.summaries += 1
        return list(update["summarized_messages"])

    def describe(self) -> str:
        return (
            f"`SummarizationNode(model=fake, max_tokens={self.window})` (defaults: "
            "max_summary_tokens=256, `count_tokens_approximately`), its `context` "
            "(running summary) carried"
        )


class TrimMessages(Strategy):
    key = "trim"
    label = "trim_messages"

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        return self._timed(
            lambda: trim_messages(
                history,
                strategy="last",
                max_tokens=self.window,
                start_on="human",
                include_system=True,
                token_counter=estimate_tokens,
            )
        )

    def describe(self) -> str:
        return (
            f'`trim_messages(history, strategy="last", max_tokens={self.window}, '
            'start_on="human", include_system=True, token_counter=estimate_tokens)`'
        )


class DeepAgentsSummarization(Strategy):
    """deepagents' own context management, with its real middleware classes.

    ``create_summarization_middleware`` (what ``create_deep_agent`` puts in every
    stack) over a model whose profile is the window: summarises at 85% of it and
    keeps 10%, cuts old ``write_file``/``edit_file`` arguments, offloads the
    summarised history to a file (a ``FilesystemBackend`` in a temporary
    directory), raises ``ContextOverflowError`` when still over. Its
    ``wrap_model_call`` runs around a capturing handler; its private state (the
    summary event, the session id) and its message replacements are carried
    between turns as the agent's state would carry them.
    """

    key = "deepagents"
    label = "deepagents (create_deep_agent default)"
    own_counter = "count_tokens_approximately"
    summarises = True

    def __init__(self, window: int, fake: FakeSummarizer) -> None:
        super().__init__(window, fake)
        import tempfile

        from deepagents.backends.filesystem import FilesystemBackend
        from deepagents.middleware.summarization import create_summarization_middleware

        fake.profile = {"max_input_tokens": window}  # its defaults follow the profile
        self.files = tempfile.TemporaryDirectory(prefix="bench-deepagents-")
        backend = FilesystemBackend(root_dir=self.files.name, virtual_mode=True)
        self.middleware = create_summarization_middleware(fake, backend)
        self.private: dict[str, Any] = {}
        self.state: list[BaseMessage] = []
        self.system: SystemMessage | None = None
        self.started = False
        self.captured: list[BaseMessage] = []

    def start(self) -> None:
        super().start()
        self.private = {}
        self.state = []
        self.system = None
        self.started = False

    def _handler(self, request: ModelRequest[Any]) -> AIMessage:
        system = [request.system_message] if request.system_message is not None else []
        self.captured = [*system, *request.messages]
        return AIMessage(content="")

    def step(self, history: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
        if not self.started:
            self.system, new = _split_system(new)
            self.started = True
        self.state = add_messages(self.state, new)  # type: ignore[arg-type]
        request = model_request(self.fake, list(self.state), self.system, **self.private)
        response = self._timed(lambda: self.middleware.wrap_model_call(request, self._handler))
        command = getattr(response, "command", None)
        update = dict(command.update) if command is not None and command.update else {}
        if update.get("messages"):
            self.state = add_messages(self.state, update.pop("messages"))  # type: ignore[arg-type]
        if update.get("_summarization_event") is not None:
            self.summaries += 1
        self.private.update(update)
        return self.captured

    def offloaded(self, model_input: list[BaseMessage]) -> str:
        """The offloaded history files the summary in ``model_input`` names, read back."""
        from langchain_core.messages import get_buffer_string

        named = get_buffer_string(model_input)
        root = Path(self.files.name)
        parts = []
        for path in sorted((root / "conversation_history").glob("*.md")):
            if f"/conversation_history/{path.name}" in named:
                # Written as ``get_buffer_string(..., format="xml")``: texts are escaped.
                parts.append(html.unescape(path.read_text(encoding="utf-8")))
        return "\n".join(parts)

    def evicts(self, tool: str, text: str) -> bool:
        """Whether ``create_deep_agent``'s filesystem middleware writes the result to a file.

        The replay runs the summarization middleware only; in a deep agent, a tool
        result over ``NUM_CHARS_PER_TOKEN * 20000`` characters (its default
        ``tool_token_limit_before_evict``) of a tool it does not exclude goes to
        ``/large_tool_results/`` with a preview and the path.
        """
        from deepagents.middleware.filesystem import (
            NUM_CHARS_PER_TOKEN,
            TOOLS_EXCLUDED_FROM_EVICTION,
        )

        limit = NUM_CHARS_PER_TOKEN * 20000
        return tool not in TOOLS_EXCLUDED_FROM_EVICTION and len(text) > limit

    def describe(self) -> str:
        return (
            "deepagents `create_summarization_middleware(model, FilesystemBackend(tmp))` "
            f"with the model's profile `max_input_tokens={self.window}` (its defaults: "
            "trigger 85%, keep 10%, `count_tokens_approximately`), `wrap_model_call` "
            "around a capturing handler, its private state carried"
        )


STRATEGIES: tuple[type[Strategy], ...] = (
    NoManagement,
    OursPruneOnly,
    OursCondense,
    OursChain,
    OursDefault,
    LCSummarization,
    LCContextEditing,
    LangmemSummarization,
    TrimMessages,
    DeepAgentsSummarization,
)
"""Every strategy, in the order of the report."""
