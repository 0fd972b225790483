"""A pipeline copies and pickles as a Runnable does: the copy works, and shares nothing.

Its locks, its Pruner's memo and its summarizer's private loop cannot be copied; a
copy builds its own. Everything else (settings, the summary memory's entries, the
breakers' counts) is copied.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_context_pipeline import DIGEST, ContextPipeline, Pruner
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from tests.support import builders
from tests.support.fakes import EchoSummarizer

COPIES: dict[str, Callable[[Any], Any]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda value: pickle.loads(pickle.dumps(value)),
}


def history() -> list[BaseMessage]:
    return builders.conversation(
        12,
        head=[SystemMessage("You are careful.", id="s"), HumanMessage("Fix billing.", id="t")],
        text=lambda i: f"Reading part {i}. " * 30,
        output=lambda i: f"def part_{i}():\n    return {i}\n" * 60,
        last=HumanMessage("go on", id="last"),
    )


def dumped(messages: list[BaseMessage]) -> list[str]:
    return [m.model_dump_json() for m in messages]


@pytest.mark.parametrize("how", list(COPIES))
@pytest.mark.parametrize("model", [None, DIGEST, "echo"])
def test_a_copied_pipeline_gives_what_the_original_gives(how: str, model: object) -> None:
    if how == "pickle" and model == "echo":
        pytest.skip("a test's fake model class is not importable by pickle")
    summarizer = EchoSummarizer() if model == "echo" else model
    pipeline = ContextPipeline(threshold=3_000, tail_budget=800, model=summarizer)
    first = pipeline.compress(history())  # fills the memo, the summary memory, the loop
    clone = COPIES[how](pipeline)
    assert clone is not pipeline
    again = clone.compress(history())
    # (A deep copy holds the summary memory's entries: it reuses the summary written.)
    assert dumped(again.messages) == dumped(first.messages)
    if how != "copy":  # a shallow copy shares the Pruner, as it shares every attribute
        assert clone.pruner is not pipeline.pruner
        assert clone.pruner._memo is not pipeline.pruner._memo


@pytest.mark.parametrize("how", list(COPIES))
def test_a_copied_pruner_starts_its_own_memo(how: str) -> None:
    pruner = Pruner(tail_budget=100)
    messages = history()
    expected = dumped(pruner.invoke(messages))
    assert pruner._memo
    clone = COPIES[how](pruner)
    assert clone._memo == {} and clone._memo is not pruner._memo
    assert dumped(clone.invoke(messages)) == expected
    assert clone._memo and len(pruner._memo) == len(clone._memo)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("recall", [True, False])
def test_the_middleware_deep_copies_and_pickles(how: str, recall: bool) -> None:
    middleware = ContextPipelineMiddleware(threshold=3_000, model=DIGEST, recall_tool=recall)
    middleware._tools_tokens(middleware.tools)  # a remembered count, holding the tools
    clone = COPIES[how](middleware)
    assert clone.pipeline is not middleware.pipeline
    out = clone.pipeline.compress(history()).messages
    assert dumped(out) == dumped(middleware.pipeline.compress(history()).messages)
    # Its own recall tool (built anew: its generated schema does not pickle), or none.
    assert [t.name for t in clone.tools] == (["recall"] if recall else [])
    assert not {id(t) for t in clone.tools} & {id(t) for t in middleware.tools}
    assert clone._tools_tokens(clone.tools) == middleware._tools_tokens(middleware.tools)
