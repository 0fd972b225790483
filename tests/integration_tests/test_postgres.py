"""Several worker processes on one PostgreSQL checkpointer: nothing lost, nothing twice.

In production, turns of one thread land on different processes sharing one
Postgres checkpointer (LangGraph's server does exactly this), and a process may
die in the middle of a turn. Here two processes started with ``multiprocessing``'s
spawn context (``pg_worker.py``) take turns on one thread of a real
``create_react_agent`` (one model call each, the graph stopping after the tools
node), with the pre-model hook in ephemeral and in persist mode, and a recording
summarizer that logs, per process, the tool-call ids of the transcript it was
given. Then:

* every model input is within budget, holds the task first and no orphan or
  unanswered tool call;
* no span is summarised twice (no tool-call id is in two summarizer transcripts),
  the summaries form one chain, each merging the one before it, and a process
  sends the model summaries the other process wrote;
* ephemeral: every original message is in the checkpoint, verbatim; persist:
  every step is either still in the checkpoint or in exactly one summary;
* a worker killed with SIGKILL in the middle of a summarizer call: another one
  resumes from the checkpoint and redoes that summary, nothing is lost;
* persist mode with a ``PostgresStore``: the originals one process archived as it
  briefed and summarised them, the other process reads back with ``recall``,
  byte for byte.

The tests need ``CONTEXT_PIPELINE_PG_URL`` (``scripts/with-postgres.sh`` starts a
throw-away server and sets it). Without it they skip, loudly; with ``CI`` or
``CONTEXT_PIPELINE_REQUIRE_PG=1`` set, they fail instead.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, messages_from_dict
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore
from psycopg.conninfo import make_conninfo

from langchain_context_pipeline import ContextPipeline, is_pipeline_summary
from langchain_context_pipeline.langgraph import DEFAULT_SUMMARY_KEY
from langchain_context_pipeline.messages.marks import MARK_KEY_ENV
from langchain_context_pipeline.messages.references import (
    REF_PATTERN,
    call_of,
    message_ref,
    stands_in,
)
from tests.integration_tests import pg_worker
from tests.integration_tests.scripted_model import TASK, ScriptedToolModel, file_content, filler
from tests.support.invariants import orphans, unanswered

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

PG_URL_ENV = "CONTEXT_PIPELINE_PG_URL"
STEPS = 40
THRESHOLD = 6000
TAIL = 2500
REPLY_TIMEOUT = 120.0
"""Seconds to wait for a worker's answer before failing (a safety net, not a timing check)."""
SUMMARY_LABEL = re.compile(r"SUMMARY\[\w+-(\d+)-\d+\]")
"""The label the recording summarizer starts each summary with: its process id."""
PARALLEL_EVERY = ScriptedToolModel().parallel_every
TEXT_CHARS = ScriptedToolModel().text_chars


# -- the server ---------------------------------------------------------------------------


def postgres_required() -> bool:
    """CI (``CI=true``) and ``CONTEXT_PIPELINE_REQUIRE_PG=1`` make a missing server an error."""
    ci = os.environ.get("CI", "").strip().lower()
    return (
        ci not in ("", "0", "false", "no") or os.environ.get("CONTEXT_PIPELINE_REQUIRE_PG") == "1"
    )


@pytest.fixture(scope="module")
def pg_url() -> str:
    url = os.environ.get(PG_URL_ENV)
    if not url:
        message = (
            f"\n{'!' * 78}\n!! {PG_URL_ENV} is not set: NO POSTGRES, the multi-process checkpointer "
            f"tests did NOT run.\n!! Run them with: bash scripts/with-postgres.sh "
            f".venv/bin/python -m pytest -m postgres\n{'!' * 78}"
        )
        if postgres_required():
            pytest.fail(message + "\n(CI or CONTEXT_PIPELINE_REQUIRE_PG=1: Postgres is required)")
        pytest.skip(message)
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(f"{PG_URL_ENV}={url!r} is set but the server cannot be reached: {exc}")
    return url


@pytest.fixture
def database(pg_url: str) -> Iterator[str]:
    """A fresh database with the checkpointer's tables; yields its connection string."""
    name = f"context_pipeline_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    conninfo = make_conninfo(pg_url, dbname=name)
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
    yield conninfo
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the worker processes -----------------------------------------------------------------


class Worker:
    """One spawned ``pg_worker`` process and the parent's end of its pipe."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=pg_worker.serve, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.name = ""

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def call(self, *command: Any, until: Callable[[], bool] | None = None) -> dict[str, Any] | None:
        """Send a command and return the answer; None as soon as ``until()`` holds."""
        self.conn.send(command)
        deadline = time.monotonic() + REPLY_TIMEOUT
        while not self.conn.poll(0.05):
            if until is not None and until():
                return None
            if not self.process.is_alive():
                pytest.fail(f"worker {self.name} died (exit code {self.process.exitcode})")
            if time.monotonic() > deadline:
                pytest.fail(f"worker {self.name} gave no answer to {command[0]!r}")
        reply: dict[str, Any] = self.conn.recv()
        if not reply["ok"]:
            pytest.fail(f"worker {self.name} failed on {command[0]!r}:\n{reply['error']}")
        return reply

    def configure(self, settings: pg_worker.Settings) -> None:
        self.name = settings.name
        self.call("configure", asdict(settings))

    def kill(self) -> None:
        assert self.process.pid is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(30)

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self.conn.send(("stop",))
                if self.conn.poll(30):
                    self.conn.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            self.process.join(30)
        if self.process.is_alive():
            self.kill()
        self.conn.close()


class Pool:
    """Worker processes shared by the tests of this module (spawning one takes seconds)."""

    def __init__(self) -> None:
        self.workers: list[Worker] = []

    def take(self, count: int) -> list[Worker]:
        self.workers = [w for w in self.workers if w.alive]
        while len(self.workers) < count:
            self.workers.append(Worker())
        return self.workers[:count]

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


@pytest.fixture(scope="module")
def pool(pg_url: str) -> Iterator[Pool]:
    # Workers sharing a checkpointer share the key that signs the pipeline's marks
    # (spawned processes inherit it), so each trusts the summaries the others wrote.
    previous = os.environ.get(MARK_KEY_ENV)
    os.environ[MARK_KEY_ENV] = uuid.uuid4().hex
    pool = Pool()
    pool.take(2)  # both start importing at once
    yield pool
    pool.close()
    if previous is None:
        os.environ.pop(MARK_KEY_ENV, None)
    else:
        os.environ[MARK_KEY_ENV] = previous


def settings(
    name: str,
    conninfo: str,
    thread_id: str,
    mode: str,
    log_dir: Path,
    hang: bool = False,
    store: bool = False,
) -> pg_worker.Settings:
    return pg_worker.Settings(
        name=name,
        conninfo=conninfo,
        thread_id=thread_id,
        mode=mode,
        threshold=THRESHOLD,
        tail_budget=TAIL,
        steps=STEPS,
        log_path=str(log_dir / f"summarizer-{name}.jsonl"),
        hang=hang,
        store=store,
    )


# -- checks -------------------------------------------------------------------------------


def expected_call_ids(steps: int) -> list[str]:
    """The tool-call ids the scripted model makes in ``steps`` tool steps."""
    ids = []
    for step in range(steps):
        ids.append(f"call-{step}-0")
        if PARALLEL_EVERY and step % PARALLEL_EVERY == PARALLEL_EVERY - 1:
            ids.append(f"call-{step}-1")
    return ids


def check_request(messages: Sequence[BaseMessage], where: str) -> None:
    """A valid model input: within budget, task first, no orphan, no unanswered call."""
    counter = ContextPipeline(threshold=THRESHOLD, tail_budget=TAIL).token_counter
    used = counter(messages)
    assert used <= THRESHOLD, f"{where}: {used} tokens > {THRESHOLD}"
    assert messages[0].id == pg_worker.TASK_ID and messages[0].content == TASK, (
        f"{where}: the first human message (the task) is missing"
    )
    assert not orphans(messages), f"{where}: orphan tool results {orphans(messages)}"
    assert not unanswered(messages), f"{where}: unanswered calls {unanswered(messages)}"


def check_replies(replies: Sequence[dict[str, Any]]) -> list[list[BaseMessage]]:
    """One model call per step, each a valid input; returns the inputs."""
    inputs = []
    for reply in replies:
        assert len(reply["requests"]) == 1, f"step {reply['step']}: one model call per turn"
        messages = messages_from_dict(reply["requests"][0])
        check_request(messages, f"step {reply['step']} (pid {reply['pid']})")
        inputs.append(messages)
    assert replies[-1]["next"] == [], "the agent did not finish"
    return inputs


def summarizer_log(log_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(completed calls, abandoned calls) from every worker's summarizer log."""
    lines = [line for path in sorted(log_dir.glob("*.jsonl")) for line in pg_worker.log_lines(path)]
    ended = {line["label"] for line in lines if line["phase"] == "end"}
    starts = [line for line in lines if line["phase"] == "start"]
    return [s for s in starts if s["label"] in ended], [
        s for s in starts if s["label"] not in ended
    ]


def check_summaries(calls: Sequence[dict[str, Any]]) -> None:
    """No span summarised twice; the summaries form one chain, each merging the one before."""
    assert len(calls) >= 3, f"only {len(calls)} summarizer calls: the run is too short to test"
    assert len(calls) <= STEPS // 2, f"{len(calls)} summarizer calls: it re-summarises every turn"
    seen = Counter(cid for call in calls for cid in call["ids"])
    twice = sorted(cid for cid, n in seen.items() if n > 1)
    assert not twice, f"tool calls summarised twice: {twice}"
    labels = {call["label"] for call in calls}
    firsts = [call["label"] for call in calls if not call["previous"]]
    assert len(firsts) == 1, f"summaries that merged no prior summary: {firsts}"
    merged = Counter(call["previous"][0] for call in calls if call["previous"])
    assert set(merged) <= labels, "a summary merged one that was never completed"
    assert all(n == 1 for n in merged.values()), f"a summary was merged twice: {merged}"


def summary_writers(messages: Sequence[BaseMessage]) -> list[int]:
    """The pids of the processes that wrote the pipeline summaries in ``messages``."""
    pids = []
    for message in messages:
        if is_pipeline_summary(message):
            own = SUMMARY_LABEL.search(str(message.content))
            assert own is not None, "a summary the recording summarizer did not write"
            pids.append(int(own.group(1)))
    return pids


def check_summaries_cross_processes(
    replies: Sequence[dict[str, Any]], inputs: Sequence[Sequence[BaseMessage]]
) -> None:
    """Some process sent the model a summary that another process wrote."""
    handed_over = [
        reply["step"]
        for reply, messages in zip(replies, inputs, strict=True)
        if any(pid != reply["pid"] for pid in summary_writers(messages))
    ]
    assert handed_over, "no model input carried a summary written by the other process"


def checkpoint(conninfo: str, thread_id: str) -> dict[str, Any]:
    """The thread's latest checkpointed values, read directly from Postgres."""
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert saved is not None, "no checkpoint for the thread"
    values: dict[str, Any] = saved.checkpoint["channel_values"]
    return values


def check_history_complete(messages: Sequence[BaseMessage]) -> None:
    """Ephemeral mode: every original message is in the checkpoint, verbatim, once, in order."""
    assert messages[0].id == pg_worker.TASK_ID and messages[0].content == TASK
    assert not any(is_pipeline_summary(m) for m in messages), "a summary entered the history"
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), "a message is in the history twice"
    ai = [m for m in messages if isinstance(m, AIMessage)]
    assert [m.id for m in ai] == [*(f"ai-{s}" for s in range(STEPS)), f"ai-end-{STEPS}"]
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert sorted(results) == sorted(expected_call_ids(STEPS))
    for step, message in enumerate(ai[:STEPS]):
        assert message.content == filler(f"step {step}", TEXT_CHARS)
        for call in message.tool_calls:
            source = call["args"].get("path") or f"tests:{call['args'].get('command')}"
            assert results[call["id"]].content == file_content(source), f"{call['id']} changed"
    assert len(messages) == 1 + len(ai) + len(results)


def check_nothing_lost_persisted(
    messages: Sequence[BaseMessage], calls: Sequence[dict[str, Any]]
) -> None:
    """Persist mode: every step is still in the checkpoint or in exactly one summary."""
    assert messages[0].id == pg_worker.TASK_ID and messages[0].content == TASK
    assert messages[-1].id == f"ai-end-{STEPS}"
    summaries = [m for m in messages if is_pipeline_summary(m)]
    assert len(summaries) == 1, "the summary's pipeline mark did not survive the checkpoint"
    kept = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    summarised = [cid for call in calls for cid in call["ids"]]
    places = Counter([*kept, *summarised])
    expected = expected_call_ids(STEPS)
    assert sorted(places) == sorted(expected), "a step vanished without being summarised"
    assert all(n == 1 for n in places.values()), "a step is both kept and summarised"


def check_thread(mode: str, conninfo: str, thread_id: str, calls: Sequence[dict[str, Any]]) -> None:
    values = checkpoint(conninfo, thread_id)
    messages = values["messages"]
    if mode == "ephemeral":
        check_history_complete(messages)
        assert values.get(DEFAULT_SUMMARY_KEY), "no running summary in the checkpoint"
    else:
        check_nothing_lost_persisted(messages, calls)


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_two_workers_alternate_turns_on_one_thread(
    mode: str, pool: Pool, database: str, tmp_path: Path
) -> None:
    thread_id = f"alternate-{mode}"
    workers = pool.take(2)
    for name, worker in zip("ab", workers, strict=True):
        worker.configure(settings(name, database, thread_id, mode, tmp_path))

    replies = []
    for step in range(STEPS + 1):
        reply = workers[step % 2].call("step", step)
        assert reply is not None
        replies.append(reply)

    assert len({reply["pid"] for reply in replies}) == 2
    inputs = check_replies(replies)
    calls, abandoned = summarizer_log(tmp_path)
    assert not abandoned
    check_summaries(calls)
    check_summaries_cross_processes(replies, inputs)
    check_thread(mode, database, thread_id, calls)


@pytest.mark.parametrize("mode", ["ephemeral", "persist"])
def test_worker_killed_in_a_summarizer_call_loses_nothing(
    mode: str, pool: Pool, database: str, tmp_path: Path
) -> None:
    thread_id = f"killed-{mode}"
    doomed, survivor = pool.take(2)
    doomed.configure(settings("doomed", database, thread_id, mode, tmp_path, hang=True))
    survivor.configure(settings("survivor", database, thread_id, mode, tmp_path))
    doomed_log = tmp_path / "summarizer-doomed.jsonl"

    def in_summarizer_call() -> bool:
        return any(line["phase"] == "start" for line in pg_worker.log_lines(doomed_log))

    replies = []
    killed_at = None
    for step in range(STEPS + 1):
        # Turns alternate; from half-way on, the doomed worker takes every turn
        # until it is inside a summarizer call, whatever the summaries' rhythm.
        if killed_at is None and (step % 2 == 0 or step >= STEPS // 2):
            reply = doomed.call("step", step, until=in_summarizer_call)
            if reply is None:  # the doomed worker is inside its summarizer call
                doomed.kill()
                assert doomed.process.exitcode == -signal.SIGKILL
                killed_at = step
                survivor_log = tmp_path / "summarizer-survivor.jsonl"
                summaries_before = len(pg_worker.log_lines(survivor_log))
                reply = survivor.call("step", step)
                redone = pg_worker.log_lines(survivor_log)[summaries_before:]
        else:
            reply = survivor.call("step", step)
        assert reply is not None
        replies.append(reply)

    assert killed_at is not None, "the doomed worker never needed the summarizer"
    inputs = check_replies(replies)  # the step the survivor resumed included
    assert any(is_pipeline_summary(m) for m in inputs[killed_at])

    calls, abandoned = summarizer_log(tmp_path)
    assert [line["worker"] for line in abandoned] == ["doomed"]
    # The survivor redid exactly the summary the doomed worker was writing.
    assert [line["ids"] for line in redone if line["phase"] == "start"] == [abandoned[0]["ids"]]
    check_summaries(calls)
    check_thread(mode, database, thread_id, calls)


RECALL_STEPS = 60
"""Turns the writing worker may take until its checkpoint holds briefs and a summary."""
RECALL_THRESHOLD = 12000
"""A window where pruning alone keeps some turns in budget, so briefs stay in the checkpoint."""


def page_text(page: str) -> str:
    """The original's characters in one page of ``recall``: between its first and last line."""
    return page.split("\n", 1)[1].rsplit("\n", 1)[0]


def test_a_reference_archived_by_one_worker_is_recalled_by_the_other(
    pool: Pool, database: str, tmp_path: Path
) -> None:
    with PostgresStore.from_conn_string(database) as store:
        store.setup()
    thread_id = "recall-persist"
    writer, reader = pool.take(2)
    for worker, name in ((writer, "w"), (reader, "r")):
        own = settings(name, database, thread_id, "persist", tmp_path, store=True)
        worker.configure(replace(own, threshold=RECALL_THRESHOLD))
    # The writer runs until its checkpoint holds both briefs and a summary (where
    # that happens moves with the estimate; a later summary may cover every brief).
    taken = 0
    messages: list[BaseMessage] = []
    briefs: list[ToolMessage] = []
    while taken < RECALL_STEPS and not (briefs and any(map(is_pipeline_summary, messages))):
        assert writer.call("step", taken) is not None
        taken += 1
        messages = checkpoint(database, thread_id)["messages"]
        briefs = [m for m in messages if isinstance(m, ToolMessage) and stands_in(m)]
    assert briefs, "no tool result was briefed: the run is too short to test"
    for brief in briefs:
        call = call_of(brief, messages)
        assert call is not None
        source = call["args"].get("path") or f"tests:{call['args'].get('command')}"
        original = file_content(source)
        assert brief.content != original  # the checkpoint holds only the brief
        ref = message_ref(brief)
        reply = reader.call("recall", ref, 0)
        assert reply is not None and reply["pid"] != writer.process.pid
        page = reply["text"]
        assert page.startswith(f"[recall ref={ref}: tool result of {call['name']}"), page
        assert page.endswith(f"[end of ref={ref}]")
        assert page_text(page) == original  # byte for byte, from the other process

    # The summary's span, archived by the writer, is read back by the reader, page by page.
    summary = next(m for m in messages if is_pipeline_summary(m))
    span = next(r for r in REF_PATTERN.findall(str(summary.content)) if ".." in r)
    pages: list[str] = []
    while not pages or not pages[-1].endswith(f"[end of ref={span}]"):
        offset = sum(len(page_text(p)) for p in pages)
        reply = reader.call("recall", span, offset)
        assert reply is not None
        pages.append(reply["text"])
        assert re.match(rf"\[recall ref={re.escape(span)}: \d+ messages; ", pages[-1]), pages[-1]
    transcript = "".join(page_text(p) for p in pages) + "\n---"
    kept = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    summarised = [cid for cid in expected_call_ids(taken) if cid not in kept]
    assert summarised, "nothing was summarised: the run is too short to test"
    for cid in summarised:
        step, index = cid.split("-")[1:]
        source = f"src/payments/module_{step}.py"
        if index == "1":
            source = f"tests:pytest tests/test_module_{step}.py"
        assert f"---\n{file_content(source)}\n---" in transcript, f"{cid} not in the span"
