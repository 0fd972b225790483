"""A worker process for ``test_postgres``: turns of one agent thread on a shared Postgres.

The test starts several of these with ``multiprocessing``'s spawn context and
drives them over a pipe, one command at a time:

* ``("configure", settings)``: build the summarizer and the hook (see
  :class:`Settings`); answers ``{"ok": True, "pid": ...}``;
* ``("step", k)``: run one model turn of step ``k`` of the thread through a real
  ``create_react_agent`` whose checkpointer is a ``PostgresSaver`` (the graph
  stops after the tools node, so the next step may run in another process);
  answers with the messages the model received;
* ``("recall", ref, offset)``: run the ``recall`` tool of a worker configured
  with ``store=True`` on the thread's checkpointed messages, as the agent's tool
  node would, and answer with the tool's text (the thread is not changed);
* ``("stop",)``: close and exit.

Every summarizer call is logged to a JSON-lines file of this process: a
``start`` line (with the tool-call ids found in the fenced transcript and the
labels of the previous summaries it merges) before answering, and an ``end``
line after. A worker configured with ``hang=True`` writes its ``start`` line
and then sleeps, so the test can kill it with SIGKILL in the middle of the call.
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict

from tests.support.fakes import Call, ReplyingChatModel

TASK_ID = "task"
CALL_ID = re.compile(r"call-\d+-\d+")
LABEL = re.compile(r"SUMMARY\[[^\]]+\]")
TRANSCRIPT = re.compile(r"<<<TRANSCRIPT (\w+)>>>\n(.*)\n<<<END TRANSCRIPT \1>>>", re.S)
PREVIOUS = re.compile(r"<<<PREVIOUS SUMMARY (\w+)>>>\n(.*)\n<<<END PREVIOUS SUMMARY \1>>>", re.S)


@dataclass(frozen=True)
class Settings:
    """How a worker builds its agent."""

    name: str
    """The worker's name, used in its log lines and summary labels."""
    conninfo: str
    """The Postgres connection string of the checkpointer."""
    thread_id: str
    """The one thread all workers take turns on."""
    mode: str
    """The hook's mode: ``"ephemeral"`` or ``"persist"``."""
    threshold: int
    tail_budget: int
    steps: int
    """Tool steps of the scripted model; step ``steps`` is the final answer."""
    log_path: str
    """Where this worker logs its summarizer calls (JSON lines)."""
    hang: bool = False
    """Hang in every summarizer call (after logging its start)."""
    store: bool = False
    """Keep originals in a ``PostgresStore`` on the same database and give the agent
    the ``recall`` tool (the store's tables must exist: the test sets them up)."""


def parse_prompt(messages: list[BaseMessage]) -> tuple[list[str], list[str]]:
    """Return (tool-call ids inside the fenced transcript, summary labels in the previous summary)."""
    body = str(messages[-1].content)
    transcript = TRANSCRIPT.search(body)
    previous = PREVIOUS.search(body)
    ids = sorted(set(CALL_ID.findall(transcript.group(2)))) if transcript else []
    labels = LABEL.findall(previous.group(2)) if previous else []
    return ids, labels


class RecordingSummarizer(ReplyingChatModel):
    """A deterministic summarizer that logs the spans it covers, and may hang."""

    llm_type = "recording-summarizer"
    worker: str
    log_path: str
    hang: bool = False
    calls: int = 0

    def _log(self, record: dict[str, Any]) -> None:
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _reply(self, messages: list[BaseMessage], call: Call) -> str:
        self.calls += 1
        label = f"SUMMARY[{self.worker}-{os.getpid()}-{self.calls}]"
        ids, previous = parse_prompt(messages)
        record = {"worker": self.worker, "pid": os.getpid(), "label": label}
        self._log({**record, "phase": "start", "ids": ids, "previous": previous})
        if self.hang:
            time.sleep(3600)  # killed long before this returns
        merged = f" merged {previous[0]}" if previous else ""
        text = f"{label}: covers {len(ids)} tool results: {' '.join(ids)}.{merged}"
        self._log({**record, "phase": "end"})
        return text


class _Worker:
    def __init__(self, settings: Settings) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver

        from langchain_context_pipeline.langgraph import create_pre_model_hook

        self.settings = settings
        self.summarizer = RecordingSummarizer(
            worker=settings.name, log_path=settings.log_path, hang=settings.hang
        )
        self.hook = create_pre_model_hook(
            mode=settings.mode,
            threshold=settings.threshold,
            tail_budget=settings.tail_budget,
            model=self.summarizer,
            # A hanging worker must still be inside its call when the test kills it.
            summary_timeout=None if settings.hang else 60.0,
        )
        self._saver_cm = PostgresSaver.from_conn_string(settings.conninfo)
        self.saver = self._saver_cm.__enter__()
        self._store_cm: Any = None
        self.store: Any = None
        if settings.store:
            from langgraph.store.postgres import PostgresStore

            self._store_cm = PostgresStore.from_conn_string(settings.conninfo)
            self.store = self._store_cm.__enter__()
        self.config: Any = {
            "configurable": {"thread_id": settings.thread_id},
            "recursion_limit": 100,
        }

    def close(self) -> None:
        if self._store_cm is not None:
            self._store_cm.__exit__(None, None, None)
        self._saver_cm.__exit__(None, None, None)

    def tools(self) -> list[Any]:
        from langchain_context_pipeline.recall import create_recall_tool
        from tests.integration_tests.scripted_model import TOOLS

        return [*TOOLS, create_recall_tool()] if self.store is not None else list(TOOLS)

    def step(self, step: int) -> dict[str, Any]:
        from langgraph.prebuilt import create_react_agent

        from tests.integration_tests.scripted_model import TASK, ScriptedToolModel

        # A fresh model per step, numbered by the step: the agent's turns are
        # split across processes, so no process can count them itself.
        model = ScriptedToolModel(steps=self.settings.steps, start=step)
        graph = create_react_agent(
            model,
            self.tools(),
            pre_model_hook=self.hook,
            checkpointer=self.saver,
            store=self.store,
            interrupt_after=["tools"],
        )
        payload = {"messages": [HumanMessage(TASK, id=TASK_ID)]} if step == 0 else None
        graph.invoke(payload, self.config)
        state = graph.get_state(self.config)
        return {
            "ok": True,
            "pid": os.getpid(),
            "step": step,
            "requests": [messages_to_dict(r.messages) for r in model.requests],
            "next": list(state.next),
        }

    def recall(self, ref: str, offset: int) -> dict[str, Any]:
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode

        assert self.store is not None, "configure the worker with store=True"
        saved = self.saver.get_tuple(self.config)
        assert saved is not None, "no checkpoint for the thread"
        messages = list(saved.checkpoint["channel_values"]["messages"])
        call = {"name": "recall", "args": {"ref": ref, "offset": offset}, "id": "recall-0"}
        messages.append(AIMessage("", tool_calls=[{**call, "type": "tool_call"}], id="ask"))
        graph = StateGraph(MessagesState)
        graph.add_node("tools", ToolNode(self.tools()))
        graph.add_edge(START, "tools")
        out = graph.compile(store=self.store).invoke({"messages": messages}, self.config)
        return {"ok": True, "pid": os.getpid(), "text": str(out["messages"][-1].content)}


def serve(conn: Connection) -> None:
    """Answer the test's commands until ``("stop",)``; the target of the worker process.

    The spawn context gives the child the parent's ``sys.path`` (the repository
    root among it), so ``tests.integration_tests.pg_worker`` and the helpers it
    imports resolve as they do in the test.
    """
    warnings.filterwarnings("ignore", "create_react_agent has been moved", DeprecationWarning)
    worker: _Worker | None = None
    try:
        while True:
            command = conn.recv()
            try:
                if command[0] == "stop":
                    conn.send({"ok": True})
                    return
                if command[0] == "configure":
                    if worker is not None:
                        worker.close()
                    worker = _Worker(Settings(**command[1]))
                    conn.send({"ok": True, "pid": os.getpid()})
                elif command[0] == "step":
                    assert worker is not None, "configure the worker first"
                    conn.send(worker.step(command[1]))
                elif command[0] == "recall":
                    assert worker is not None, "configure the worker first"
                    conn.send(worker.recall(command[1], command[2]))
                else:
                    conn.send({"ok": False, "error": f"unknown command {command!r}"})
            except Exception:
                conn.send({"ok": False, "error": traceback.format_exc()})
    finally:
        if worker is not None:
            worker.close()
        conn.close()


def log_lines(path: Path) -> list[dict[str, Any]]:
    """Read a worker's summarizer log (empty when it never summarised)."""
    if not path.exists():
        return []
    # The file may be read while a line is being written: skip an unfinished last line.
    *complete, _unfinished = path.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in complete if line]
