"""Callback handlers the tests read runs from: what started (names, tags) and what finished."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers import BaseTracer
from langchain_core.tracers.schemas import Run


class Recorder(BaseCallbackHandler):
    """Records the name and tags of every chain and chat model run as it starts."""

    def __init__(self) -> None:
        self.runs: list[tuple[str | None, list[str]]] = []
        """Every chain and chat model run, in the order they started: ``(name, tags)``."""
        self.chat_runs: list[tuple[str | None, list[str]]] = []
        """The chat model runs alone: ``(name, tags)``."""
        self.chain_runs: list[str | None] = []
        """The chain runs' names alone."""

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        run = (kwargs.get("name"), list(kwargs.get("tags") or []))
        self.runs.append(run)
        self.chat_runs.append(run)

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.runs.append((kwargs.get("name"), list(kwargs.get("tags") or [])))
        self.chain_runs.append(kwargs.get("name"))


class RunLog(BaseTracer):
    """Keeps every finished chain run and every chat model run, as a tracer sees them."""

    def __init__(self) -> None:
        super().__init__(_schema_format="original+chat")  # record chat model runs too
        self.chains: list[Run] = []
        self.chat_models: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_chain_end(self, run: Run) -> None:
        self.chains.append(run)

    def _on_chat_model_start(self, run: Run) -> None:
        self.chat_models.append(run)
