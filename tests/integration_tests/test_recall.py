"""Real agents that read back a pruned tool result with the ``recall`` tool.

A scripted model reads a 200,000-character file at step 1, then other files until
step 40, where it finds the big result's reference in its brief and calls
``recall`` page after page until the last line says nothing is left. The pages put
together must be the original, byte for byte. Run with ``create_react_agent`` and
the hook (ephemeral mode: the originals come from graph state; persist mode: from
the graph's ``InMemoryStore``) and with ``create_agent`` and the middleware (which
adds the tool itself), sync and async.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.store.memory import InMemoryStore
from pydantic import Field, PrivateAttr

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.langgraph import create_pre_model_hook
from langchain_context_pipeline.messages.references import REF_PATTERN
from langchain_context_pipeline.middleware import ContextPipelineMiddleware
from langchain_context_pipeline.recall import create_recall_tool
from tests.integration_tests.scripted_model import file_content
from tests.support.fakes import Call, ReplyingChatModel

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning"),
]

THRESHOLD = 16000
TAIL = 4000
RECALL_AT = 40
BIG_PATH = "src/big_module.py"
BIG = "\n".join(f"{i:06d} big = compute({i}, 'payments')  # line {i}" for i in range(6000))[
    :200_000
]
NEXT_PAGE = re.compile(r"offset=(\d+)\) for the next page\]$")


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return BIG if path == BIG_PATH else file_content(path)


class RecallingModel(ReplyingChatModel):
    """Reads files; at step ``recall_at`` recalls the big file's brief, page by page."""

    llm_type = "recalling-model"
    recall_at: int = RECALL_AT
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    pages: list[str] = Field(default_factory=list)
    brief: str = ""
    _calls: int = PrivateAttr(default=0)
    _ref: str = PrivateAttr(default="")

    @staticmethod
    def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
        call = {"name": name, "args": args, "id": cid, "type": "tool_call"}
        return AIMessage(f"step {cid}", tool_calls=[call], id=f"ai-{cid}")

    def _reply(self, messages: list[BaseMessage], call: Call) -> AIMessage:
        self.requests.append(list(messages))
        step = self._calls
        self._calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "recall":
            page = str(last.content)
            self.pages.append(page)
            more = NEXT_PAGE.search(page)
            if more:
                args = {"ref": self._ref, "offset": int(more.group(1))}
                return self._call("recall", args, f"recall-{step}")
            return AIMessage("Recalled the whole file.", id="ai-end")
        if step == 1:
            return self._call("read_file", {"path": BIG_PATH}, "call-big")
        if step == self.recall_at:
            # The brief of the big result, as the model sees it now.
            brief = next(
                m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "call-big"
            )
            self.brief = str(brief.content)
            match = REF_PATTERN.search(self.brief)
            assert match is not None, f"no reference in the brief {self.brief!r}"
            self._ref = match.group(1)
            return self._call("recall", {"ref": self._ref}, f"recall-{step}")
        return self._call("read_file", {"path": f"src/module_{step}.py"}, f"call-{step}")


def page_text(page: str) -> str:
    """The original's characters in one page: everything between its first and last line."""
    return page.split("\n", 1)[1].rsplit("\n", 1)[0]


def check_recalled(model: RecallingModel) -> None:
    assert model.brief.startswith(f"[read_file] {BIG_PATH} ("), model.brief
    assert len(model.pages) == -(-len(BIG) // 8000)  # default pages of 8,000 chars
    assert "".join(page_text(p) for p in model.pages) == BIG
    assert model.pages[0].startswith(f'[recall ref={model._ref}: tool result of read_file {{"path"')
    assert model.pages[-1].endswith(f"[end of ref={model._ref}]")
    # Every request of the run (recall pages included) stayed within budget.
    counter = ContextPipeline().token_counter
    assert all(counter(r) <= THRESHOLD for r in model.requests)


def run(graph: Any, config: dict[str, Any], mode: str) -> None:
    payload = {"messages": [HumanMessage("Fix the bug.", id="task")]}
    if mode == "sync":
        graph.invoke(payload, config)
    else:
        asyncio.run(graph.ainvoke(payload, config))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("hook_mode", ["ephemeral", "persist"])
def test_react_agent_recalls_a_pruned_result(mode: str, hook_mode: str) -> None:
    model = RecallingModel()
    hook = create_pre_model_hook(threshold=THRESHOLD, tail_budget=TAIL, mode=hook_mode)  # type: ignore[arg-type]
    tools: list[BaseTool] = [read_file, create_recall_tool()]
    graph = create_react_agent(
        model, tools, pre_model_hook=hook, checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = {"configurable": {"thread_id": f"t-{mode}-{hook_mode}"}, "recursion_limit": 500}
    run(graph, config, mode)
    check_recalled(model)
    if hook_mode == "persist":  # the state itself no longer holds the original
        state = graph.get_state(config).values["messages"]
        assert not any(m.content == BIG for m in state)


MIDDLEWARE_RECALL_AT = 30
"""The middleware counts the system prompt and the tool schemas beside the messages, and
the brief of every read_file result here lists its names (``names: handler_0 handler_1
...``, one kind of unit repeated with spaces between, which the estimate charges copy by
copy: 280 tokens for a brief the fit charges 196): truncation drops the big result's
turn from step 39 on (from step 52 before such lists were charged so)."""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_create_agent_middleware_adds_recall_and_it_works(mode: str) -> None:
    model = RecallingModel(recall_at=MIDDLEWARE_RECALL_AT)
    middleware = ContextPipelineMiddleware(threshold=THRESHOLD, tail_budget=TAIL)
    graph = create_agent(model, [read_file], middleware=[middleware])
    config = {"configurable": {"thread_id": f"m-{mode}"}, "recursion_limit": 500}
    run(graph, config, mode)
    check_recalled(model)


def test_middleware_recall_tool_can_be_left_out() -> None:
    assert [t.name for t in ContextPipelineMiddleware().tools] == ["recall"]
    assert ContextPipelineMiddleware(recall_tool=False).tools == []
