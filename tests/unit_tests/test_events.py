"""The stream event and trace metadata built from a report, and the import tiers."""

from __future__ import annotations

import ast
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

import langchain_context_pipeline
from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.core.events import (
    EVENT_TYPE,
    METADATA_PREFIX,
    compress_traced,
    essentials,
    report_event,
    trace_metadata,
)
from langchain_context_pipeline.core.report import CompressionReport

ENTRY_POINTS = {
    "langgraph.py",
    "middleware.py",
    "deepagents.py",
    "_stream.py",
    "__main__.py",
    "recall.py",
    "_archive.py",
}


def long_history(turns: int = 40) -> list:
    messages: list = [HumanMessage("the task")]
    for i in range(turns):
        messages += [AIMessage(f"step {i} " + "x" * 2000), HumanMessage(f"go on {i}")]
    return messages


def test_no_event_on_a_no_op_pass() -> None:
    history = long_history(2)
    result = ContextPipeline(threshold=100000).compress(history)
    assert result.messages is history
    assert report_event(result.report) is None
    assert trace_metadata(result.report)[METADATA_PREFIX + "stages"] == []


def test_a_reused_summary_alone_is_an_event() -> None:
    report = CompressionReport(threshold=1000, limit=1000, tokens_before=900, tokens_after=400)
    report.summary_reused = True
    event = report_event(report)
    assert event is not None
    assert event["type"] == EVENT_TYPE
    assert event["summary_reused"] and not event["summary_written"]
    assert event["stages"] == []


def test_event_and_metadata_carry_the_figures_of_a_compressing_pass() -> None:
    result = compress_traced(
        ContextPipeline(threshold=4000, tail_budget=1000, model=DIGEST), long_history()
    )
    report = result.report
    event = report_event(report)
    assert event is not None
    assert event["tokens_before"] == report.tokens_before > 4000
    assert event["tokens_after"] == report.tokens_after <= 4000
    assert event["stages"] == report.stages and "condense" in report.stages
    assert event["summary_written"] and event["summary_source"] == "digest"
    assert trace_metadata(report) == {METADATA_PREFIX + k: v for k, v in essentials(report).items()}


def test_core_modules_import_only_langchain_core() -> None:
    """Below the entry points, no module-level import of langgraph, langchain or deepagents.

    (A function may import an optional package lazily, with an install hint.)
    """
    package = Path(langchain_context_pipeline.__file__).parent
    offenders = set()
    for path in package.glob("*.py"):
        if path.name in ENTRY_POINTS:
            continue
        statements = ast.parse(path.read_text()).body
        statements += [n for s in statements if isinstance(s, ast.Try) for n in s.body]
        for node in statements:
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in {"langgraph", "langchain", "deepagents"}:
                    offenders.add(f"{path.name}: {name}")
    assert not offenders
