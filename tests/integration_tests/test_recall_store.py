"""Originals in a store: isolation between threads, a missing thread id, a failing store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.messages.references import message_ref
from langchain_context_pipeline.recall import (
    aarchive_originals,
    archive_originals,
    create_recall_tool,
)

pytestmark = pytest.mark.integration

ORIGINAL = "0123456789\n" * 2000


def history(thread: str) -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": f"{thread}.py"}, "id": "c1", "type": "tool_call"}
    return [
        HumanMessage("task", id=f"{thread}-task"),
        AIMessage("", tool_calls=[call], id=f"{thread}-a1"),
        ToolMessage(f"{thread}:{ORIGINAL}", tool_call_id="c1", id=f"{thread}-t1"),
        HumanMessage("next " * 300, id=f"{thread}-h2"),
    ]


PIPELINE = ContextPipeline(threshold=2000, tail_budget=400)


class FailingStore(InMemoryStore):
    def batch(self, ops: Iterable[Any]) -> list[Any]:
        raise ConnectionError("store unreachable")

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        raise ConnectionError("store unreachable")


def recall(store: Any, thread: str | None, ref: str, state: list[BaseMessage] | None = None) -> str:
    """Call the recall tool as an agent's tool node would, in a graph with ``store``."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([create_recall_tool()]))
    graph.add_edge(START, "tools")
    call = {"name": "recall", "args": {"ref": ref}, "id": "r1", "type": "tool_call"}
    messages = [*(state or []), AIMessage("", tool_calls=[call], id="ask")]
    config: dict[str, Any] = {"configurable": {"thread_id": thread}} if thread else {}
    out = graph.compile(store=store).invoke({"messages": messages}, config)
    return str(out["messages"][-1].content)


def archived(store: Any, thread: str) -> str:
    before = history(thread)
    result = archive_originals(store, thread, before, PIPELINE.compress(before))
    assert result.report.archive_failures == 0
    assert ORIGINAL not in str(result.messages[2].content)  # briefed
    return message_ref(before[2])


def test_a_thread_reads_its_own_originals_only() -> None:
    store = InMemoryStore()
    ref_a, ref_b = archived(store, "A"), archived(store, "B")
    page = recall(store, "A", ref_a)
    assert page.split("\n", 1)[1].startswith("A:0123456789")
    # B's reference, copied into A's conversation, names nothing there.
    assert recall(store, "A", ref_b) == f"recall: no original for ref={ref_b} in this conversation."
    assert (
        recall(store, "A", "ffffffff")
        == "recall: no original for ref=ffffffff in this conversation."
    )


def test_missing_thread_id_and_malformed_refs_get_clear_texts() -> None:
    store = InMemoryStore()
    ref = archived(store, "A")
    assert "without a thread_id" in recall(store, None, ref)
    assert "is not a reference" in recall(store, "A", "../../A")


def test_a_failing_store_keeps_the_budget_counts_and_says_not_recallable() -> None:
    before = history("A")
    result = archive_originals(FailingStore(), "A", before, PIPELINE.compress(before))
    assert result.report.tokens_after <= 2000
    assert result.report.archive_failures == 1
    assert str(result.messages[2].content).endswith(
        f"ref={message_ref(before[2])} (not recallable)"
    )
    text = recall(FailingStore(), "A", message_ref(before[2]))
    assert "the archive could not be read (ConnectionError)" in text


async def test_async_archive_and_missing_thread_degrade() -> None:
    before = history("A")
    store = InMemoryStore()
    result = await aarchive_originals(store, "A", before, await PIPELINE.acompress(before))
    assert result.report.archive_failures == 0 and store.get(
        ("context_pipeline_originals", "A"), message_ref(before[2])
    )
    failed = await aarchive_originals(FailingStore(), "A", before, await PIPELINE.acompress(before))
    assert failed.report.archive_failures == 1
    none = archive_originals(store, None, before, PIPELINE.compress(before))
    assert none.report.archive_failures == 1


def test_state_history_is_read_without_any_store() -> None:
    before = history("A")
    page = recall(None, None, message_ref(before[2]), state=before)
    assert page.startswith(
        f'[recall ref={message_ref(before[2])}: tool result of read_file {{"path": "A.py"}}'
    )
    assert page.split("\n", 1)[1].rsplit("\n", 1)[0] == f"A:{ORIGINAL}"[:8000]
