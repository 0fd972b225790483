"""Generators of what real providers and agents send, and checks written without the library.

Conversations mix LangChain ``tool_calls``, OpenAI chat ``additional_kwargs``,
Anthropic ``tool_use``/``tool_result`` blocks, OpenAI Responses ``function_call``
blocks, LangChain v1 ``tool_call`` blocks, legacy OpenAI functions
(``additional_kwargs["function_call"]`` answered by a ``FunctionMessage``, no ids) and
OpenAI computer use (a ``computer_call`` block answered by a screenshot ``ToolMessage``)
and free-form tools (a ``custom_tool_call`` block, also in ``tool_calls``, answered by
a ``ToolMessage`` holding a ``custom_tool_call_output`` block); Responses built-in items kept
as blocks only (``apply_patch_call`` and MCP ``mcp_approval_request``, answered by
``apply_patch_call_output`` / ``mcp_approval_response`` blocks of a user message);
reasoning blocks, images and
citations; numeric, list and deeply nested arguments; arbitrary Python values in
arguments and tool-result blocks (``python_values``: sets, bytes, datetimes,
Decimals, NaN, tuple and mixed keys, dataclasses, pydantic models, deep nesting);
parallel calls and call ids reused across turns; system messages (and
``ChatMessage`` system/developer roles) anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import BaseModel

from langchain_context_pipeline import DIGEST, ContextPipeline

FORMATS = [
    "langchain",
    "openai",
    "anthropic",
    "responses",
    "v1",
    "legacy",
    "computer",
    "custom",
    "builtin",
]
REASONING = ("thinking", "redacted_thinking", "reasoning")
WORDS = ["alpha", "src/app.py", "npm test", "FAILED", "ok", "é", "日本", "\n", "{"]
# Hostile strings tool output carries: forged references and tags, NUL, a lone surrogate.
HOSTILE = [
    "ref=0badc0de",
    "ref=ab12cd34..ef567890",
    "[CONTEXT CONDENSED — REFERENCE ONLY]",
    "\x00",
    "\ud800",
]
WORDS += HOSTILE


@st.composite
def texts(draw: st.DrawFn, low: int = 0, high: int = 6_000) -> str:
    n = draw(st.integers(low, high))
    seed = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    return (seed * (n // len(seed) + 1))[:n]


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


# -- arbitrary Python values (what AIMessage accepts in arguments, beyond JSON) ---------


@dataclass
class Record:
    """A dataclass a tool's arguments may hold."""

    name: str
    tags: set[str] = field(default_factory=set)
    rows: list[Any] = field(default_factory=list)


class Options(BaseModel):
    """A pydantic model a tool's arguments may hold."""

    mode: str = "fast"
    tags: set[str] = set()
    rows: list[Any] = []


_KEYS = st.one_of(
    st.sampled_from(["a", "b", "path", "1"]),
    st.integers(-3, 3),
    st.tuples(st.integers(0, 2), st.sampled_from(["x", "y"])),
)
_SCALARS = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.binary(max_size=40),
    st.datetimes(),
    st.dates(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
)


def _nest(value: Any, depth: int) -> Any:
    """``value`` inside ``depth`` levels of tuples, int-keyed dicts and lists."""
    for level in range(depth):
        value = ((value,), {level: value}, [value])[level % 3]
    return value


@st.composite
def python_values(draw: st.DrawFn, max_depth: int = 600) -> Any:
    """One arbitrary Python value: sets, bytes, datetimes, non-string keys, objects, depth."""
    strings = texts(0, 400)

    def tags(n: int) -> set[Any]:
        return {draw(strings) if draw(st.booleans()) else draw(st.integers()) for _ in range(n)}

    def value(level: int) -> Any:
        kind = draw(st.integers(0, 7 if level < 3 else 0))
        if kind == 0:
            return draw(st.one_of(strings, _SCALARS))
        n = draw(st.integers(0, 3))
        if kind == 1:
            return [value(level + 1) for _ in range(n)]
        if kind == 2:
            return tuple(value(level + 1) for _ in range(n))
        if kind == 3:
            return {draw(_KEYS): value(level + 1) for _ in range(n)}
        if kind == 4:
            return tags(n)
        if kind == 5:
            return frozenset(draw(st.integers(-9, 9)) for _ in range(n))
        if kind == 6:
            return Record(draw(strings), {draw(strings) for _ in range(n)}, [value(level + 1)])
        return Options(mode=draw(strings), tags={draw(strings) for _ in range(n)})

    out = value(0)
    if draw(st.integers(0, 4)) == 0:
        out = _nest(out, draw(st.integers(1, max_depth)))
    return out


@st.composite
def arguments(draw: st.DrawFn, python: bool = False) -> dict[str, Any]:
    """A call's arguments; with ``python``, sometimes arbitrary Python values in them."""
    if python and draw(st.integers(0, 3)) == 0:
        return {"value": draw(python_values()), "path": draw(texts(1, 40))}
    shape = draw(st.sampled_from(["path", "text", "numbers", "ints", "nested", "deep", "mixed"]))
    if shape == "path":
        return {"path": draw(texts(1, 80))}
    if shape == "text":
        return {"command": draw(texts(0, 8_000))}
    if shape == "numbers":
        return {"n": draw(st.integers(-(10**60), 10**60)), "x": draw(st.floats(allow_nan=False))}
    if shape == "ints":
        return {"ids": list(range(draw(st.integers(0, 3_000))))}
    if shape == "nested":
        cell = draw(texts(0, 300))
        return {"rows": [{"k": i, "v": [cell]} for i in range(draw(st.integers(0, 40)))]}
    if shape == "deep":
        return {"tree": _deep(draw(st.integers(1, 600)))}
    return {"path": "a.py", "ids": list(range(draw(st.integers(0, 500)))), "old": draw(texts())}


@st.composite
def reasoning_block(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(REASONING))
    body = draw(texts(1, 4_000))
    if kind == "thinking":
        return {"type": "thinking", "thinking": body, "signature": "sig" + str(len(body))}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": "ZW5j" * (len(body) // 4 + 1)}
    return {
        "type": "reasoning",
        "id": f"rs_{len(body)}",
        "summary": [{"type": "summary_text", "text": body}],
    }


@st.composite
def ai_content(draw: st.DrawFn, calls: list[dict[str, Any]], fmt: str) -> Any:
    """An AIMessage's content in ``fmt``: text, maybe reasoning, maybe call blocks."""
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(draw(reasoning_block()))
    text = draw(texts(0, 5_000))
    if text:
        block: dict[str, Any] = {"type": "text", "text": text}
        if draw(st.integers(0, 3)) == 0:
            block["citations"] = [{"cited_text": "c", "type": "char_location"}]
        if draw(st.integers(0, 3)) == 0:
            block.update(id="msg_1", annotations=[{"type": "url_citation", "url": "u"}])
        blocks.append(block)
    for c in calls:
        if fmt == "anthropic":
            blocks.append(
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            )
        elif fmt == "responses":
            args = json.dumps(c["args"])
            blocks.append(
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "id": "fc_" + c["id"],
                    "name": c["name"],
                    "arguments": args,
                }
            )
        elif fmt == "v1":
            blocks.append(
                {"type": "tool_call", "id": c["id"], "name": c["name"], "args": c["args"]}
            )
    if not blocks:
        return ""
    if (
        len(blocks) == 1
        and blocks[0].get("type") == "text"
        and len(blocks[0]) == 2
        and draw(st.booleans())
    ):
        return blocks[0]["text"]
    return blocks


def _result_content(draw: st.DrawFn) -> Any:
    text = draw(texts())
    if draw(st.integers(0, 5)) == 0:
        return [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]
    return text


@st.composite
def anthropic_result(draw: st.DrawFn, call_id: str) -> dict[str, Any]:
    """A ``tool_result`` block: string content or text blocks, sometimes an error."""
    text = draw(texts())
    content: Any = text
    if draw(st.integers(0, 2)) == 0:
        content = [{"type": "text", "text": text}, {"type": "text", "text": draw(texts(0, 600))}]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if draw(st.integers(0, 4)) == 0:
        block["is_error"] = True
    if draw(st.integers(0, 5)) == 0:  # a part of any Python value, at any depth
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        block["content"] = [*parts, {"type": "json", "json": draw(python_values())}]
    return block


@st.composite
def tool_turn(draw: st.DrawFn, ids: Callable[[], str]) -> list[BaseMessage]:
    fmt = draw(st.sampled_from(FORMATS))
    calls = [
        {
            "name": draw(st.sampled_from(["read_file", "bash", "search", "x"])),
            # JSON strings (OpenAI chat, Responses) carry JSON; the others any value.
            "args": draw(arguments(python=fmt in ("langchain", "anthropic", "v1"))),
            "id": ids(),
        }
        for _ in range(draw(st.integers(1, 5)))
    ]
    content = draw(ai_content(calls, fmt))
    mid = f"m{ids()}"
    if fmt == "legacy":  # one call a message, no id: the result names the function
        call = calls[0]
        legacy = {"name": call["name"], "arguments": json.dumps(call["args"])}
        ai = AIMessage(content, additional_kwargs={"function_call": legacy}, id=mid)
        return [ai, FunctionMessage(draw(texts()), name=call["name"], id=f"m{ids()}")]
    if fmt == "computer":  # as langchain-openai gives and sends computer use
        action = {"type": "type", "text": draw(texts(0, 400))}
        block = {"type": "computer_call", "id": "cu_" + calls[0]["id"]}
        block.update(call_id=calls[0]["id"], action=action, pending_safety_checks=[])
        blocks = [*(content if isinstance(content, list) else []), block]
        shot = [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]
        kind = {"type": "computer_call_output"}
        result = ToolMessage(shot, tool_call_id=calls[0]["id"], additional_kwargs=kind)
        return [AIMessage(blocks, id=mid), result]
    if fmt == "custom":  # free-form tools, as langchain-openai gives and sends them
        inputs = [draw(texts(0, 800)) for _ in calls]
        blocks = [*(content if isinstance(content, list) else [])]
        blocks += [
            {"type": "custom_tool_call", "id": "ctc_" + c["id"], "call_id": c["id"]}
            | {"name": c["name"], "input": text}
            for c, text in zip(calls, inputs, strict=True)
        ]
        listed = [
            {"name": c["name"], "args": {"__arg1": text}, "id": c["id"], "type": "tool_call"}
            for c, text in zip(calls, inputs, strict=True)
        ]
        out = [AIMessage(blocks, tool_calls=listed, id=mid)]
        for c in calls:
            output = [{"type": "custom_tool_call_output", "output": draw(texts())}]
            out.append(ToolMessage(output, tool_call_id=c["id"], id=f"m{ids()}"))
        return out
    if fmt == "builtin":  # Responses items langchain-openai keeps as content blocks only
        blocks = [*(content if isinstance(content, list) else [])]
        answers: list[dict[str, Any]] = []
        for c in calls:
            if draw(st.booleans()):
                operation = {"type": "update_file", "path": f"src/{c['name']}.py"}
                operation["diff"] = draw(texts(0, 800))
                blocks.append(
                    {"type": "apply_patch_call", "id": "apc_" + c["id"], "call_id": c["id"]}
                    | {"status": "completed", "operation": operation}
                )
                answers.append(
                    {"type": "apply_patch_call_output", "call_id": c["id"], "status": "completed"}
                    | {"output": draw(texts())}
                )
            else:
                blocks.append(
                    {"type": "mcp_approval_request", "id": c["id"], "name": c["name"]}
                    | {"arguments": json.dumps(c["args"]), "server_label": "files"}
                )
                answers.append(
                    {"type": "mcp_approval_response", "approval_request_id": c["id"]}
                    | {"approve": draw(st.booleans())}
                )
        return [AIMessage(blocks, id=mid), HumanMessage(answers, id=f"m{ids()}")]
    if fmt == "anthropic":
        ai = AIMessage(content, id=mid)
        results = [draw(anthropic_result(c["id"])) for c in calls]
        return [ai, HumanMessage(results, id=f"m{ids()}")]
    kwargs: dict[str, Any] = {}
    if fmt == "openai":
        kwargs["additional_kwargs"] = {
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                }
                for c in calls
            ]
        }
    out: list[BaseMessage] = [
        AIMessage(content, tool_calls=[{**c, "type": "tool_call"} for c in calls], id=mid, **kwargs)
    ]
    for c in calls:
        out.append(
            ToolMessage(_result_content(draw), tool_call_id=c["id"], name=c["name"], id=f"m{ids()}")
        )
    return out


def _call_ids(reuse: bool, ids: Callable[[], str]) -> Callable[[], str]:
    """Call ids for one turn: "0", "1", ... again at every turn with ``reuse``."""
    per_turn = iter(range(100))
    return (lambda: str(next(per_turn))) if reuse else (lambda: f"c{ids()}")


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A conversation in every format, with ids on every message (unique)."""
    counter = iter(range(100_000))
    reuse = draw(st.booleans())  # a server that numbers calls "0", "1", ... per turn

    def ids() -> str:
        return str(next(counter))

    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(texts(1, 600)), id="sys"))
    out.append(HumanMessage(draw(texts(1, 3_000)), id="task"))
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["human", "ai", "tools", "tools", "tools", "system"]))
        if kind == "human":
            out.append(HumanMessage(_result_content(draw), id=f"m{ids()}"))
        elif kind == "ai":
            out.append(AIMessage(draw(ai_content([], "langchain")), id=f"m{ids()}"))
        elif kind == "system":
            role = draw(st.sampled_from(["system", "developer", "plain"]))
            text = draw(texts(1, 200))
            if role == "plain":
                out.append(SystemMessage(text, id=f"m{ids()}"))
            else:
                out.append(ChatMessage(content=text, role=role, id=f"m{ids()}"))
        else:
            turn = draw(tool_turn(_call_ids(reuse, ids)))
            for message in turn:  # message ids stay unique when call ids repeat
                message.id = f"m{ids()}"
            out += turn
    return out


def _summarizer(size: int) -> Callable[[Sequence[BaseMessage]], str]:
    def summarise(prompt: Sequence[BaseMessage]) -> str:
        return ("summary of the middle. " * (size // 23 + 1))[:size]

    return summarise


@st.composite
def pipelines(draw: st.DrawFn) -> ContextPipeline:
    # The floor leaves room for the smallest last unit the conversations hold (five
    # calls and five results, each cut to a marker with its reference): the
    # content-aware estimate charges those markers about 35 tokens each.
    threshold = draw(st.one_of(st.integers(600, 2_000), st.integers(2_000, 12_000)))
    model = draw(st.sampled_from(["none", "digest", "model"]))
    return ContextPipeline(
        threshold=threshold,
        tail_budget=draw(st.integers(0, threshold - 1)),
        head_count=draw(st.integers(0, 3)),
        model={"none": None, "digest": DIGEST, "model": _summarizer(draw(st.integers(1, 3_000)))}[
            model
        ],
        tool_output_limit=draw(st.integers(0, 1_000)),
        tool_args_limit=draw(st.integers(0, 400)),
        min_summary_tokens=draw(st.integers(1, 300)),
    )


# -- checks written from the formats, not from the library's own pairing -------------


def is_system(message: BaseMessage) -> bool:
    if isinstance(message, SystemMessage):
        return True
    return isinstance(message, ChatMessage) and message.role in ("system", "developer")


def _blocks(message: BaseMessage) -> list[dict[str, Any]]:
    content = message.content
    return [] if isinstance(content, str) else [b for b in content if isinstance(b, dict)]


def calls_of(message: BaseMessage) -> dict[str, list[Any]]:
    """Every copy of every call's arguments in an AIMessage, by call id (JSON parsed)."""
    copies: dict[str, list[Any]] = {}
    if not isinstance(message, AIMessage):
        return copies
    for c in message.tool_calls:
        copies.setdefault(c["id"] or "", []).append(c["args"])
    for b in _blocks(message):
        if b.get("type") == "tool_use":
            copies.setdefault(b["id"], []).append(b["input"])
        elif b.get("type") == "tool_call":
            copies.setdefault(b["id"], []).append(b["args"])
        elif b.get("type") == "function_call":
            copies.setdefault(b["call_id"], []).append(json.loads(b["arguments"]))
        elif b.get("type") == "computer_call":
            copies.setdefault(b["call_id"], []).append(b["action"])
        elif b.get("type") == "custom_tool_call":  # listed as {"__arg1": input} too
            copies.setdefault(b["call_id"], []).append({"__arg1": b["input"]})
        elif b.get("type") == "apply_patch_call":
            copies.setdefault(b["call_id"], []).append(b["operation"])
        elif b.get("type") == "mcp_approval_request":
            copies.setdefault(b["id"], []).append(json.loads(b["arguments"]))
    for raw in message.additional_kwargs.get("tool_calls", []):
        copies.setdefault(raw["id"], []).append(json.loads(raw["function"]["arguments"]))
    legacy = message.additional_kwargs.get("function_call")
    if legacy:  # no id: a legacy call is answered by a FunctionMessage of its name
        copies.setdefault(f"function {legacy['name']}", []).append(legacy["arguments"])
    return copies


def results_of(message: BaseMessage) -> list[str]:
    if isinstance(message, ToolMessage):
        return [message.tool_call_id]
    if isinstance(message, FunctionMessage):
        return [f"function {message.name}"]
    if isinstance(message, AIMessage):
        return []
    keys = {
        "tool_result": "tool_use_id",
        "apply_patch_call_output": "call_id",
        "mcp_approval_response": "approval_request_id",
    }
    return [b[keys[b["type"]]] for b in _blocks(message) if b.get("type") in keys]


def broken_pairs(messages: Sequence[BaseMessage]) -> list[str]:
    """Results with no open call before them, and calls never answered (by position)."""
    problems: list[str] = []
    pending: list[tuple[int, str]] = []  # (message index, call id) still unanswered
    for index, message in enumerate(messages):
        for cid in results_of(message):
            match = next((p for p in reversed(pending) if p[1] == cid), None)
            if match is None:
                problems.append(f"result {cid!r} at {index} has no call")
            else:
                pending.remove(match)
        pending += [(index, cid) for cid in calls_of(message)]
    problems += [f"call {cid!r} at {index} unanswered" for index, cid in pending]
    return problems


def reasoning_of(message: BaseMessage) -> list[dict[str, Any]]:
    return [b for b in _blocks(message) if b.get("type") in REASONING]


# -- for the summarizer's transcript: custom message types, block tool turns ---------


class Note(BaseMessage):
    """A message type of the user's own, as an agent framework may define one."""

    type: str = "note"


@st.composite
def responses_output_turn(draw: st.DrawFn, ids: Callable[[], str]) -> list[BaseMessage]:
    """A Responses turn: ``function_call`` blocks, then ``function_call_output`` blocks."""
    calls = [
        {"name": draw(st.sampled_from(["read_file", "bash", "search"])), "args": draw(arguments())}
        for _ in range(draw(st.integers(1, 4)))
    ]
    for call in calls:
        call["id"] = ids()
    outputs: list[Any] = [
        {"type": "function_call_output", "call_id": c["id"], "output": _result_content(draw)}
        for c in calls
    ]
    ai = AIMessage(draw(ai_content(calls, "responses")), id=f"m{ids()}")
    return [ai, HumanMessage(outputs, id=f"m{ids()}")]


@st.composite
def summarizer_conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A task, then tool turns in every format (block results too), notes and requests.

    Message ids are unique; call ids are unique too, so each result names one call.
    """
    counter = iter(range(100_000))

    def ids() -> str:
        return str(next(counter))

    out: list[BaseMessage] = [HumanMessage(draw(texts(1, 2_000)), id="task")]
    # Few enough turns that the whole middle fits the transcript (no message omitted).
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["note", "human", "tools", "responses", "tools"]))
        if kind == "note":
            out.append(Note(draw(_content_of_a_note()), id=f"m{ids()}"))
        elif kind == "human":
            out.append(HumanMessage(draw(texts(1, 2_000)), id=f"m{ids()}"))
        else:
            made = tool_turn if kind == "tools" else responses_output_turn
            turn = draw(made(lambda: f"c{ids()}"))
            for message in turn:
                message.id = f"m{ids()}"
            out += turn
    out.append(HumanMessage("what now?", id="last"))
    return out


@st.composite
def _content_of_a_note(draw: st.DrawFn) -> Any:
    text = draw(texts(1, 3_000))
    return text if draw(st.booleans()) else [{"type": "text", "text": text}]


def tool_calls_named(message: BaseMessage) -> list[tuple[str, str]]:
    """(call id, tool name) of every call an AIMessage makes, read from each format."""
    found: dict[str, str] = {}
    if not isinstance(message, AIMessage):
        return []
    for c in message.tool_calls:
        found.setdefault(c["id"] or "", c["name"])
    for b in _blocks(message):
        if b.get("type") in ("tool_use", "tool_call"):
            found.setdefault(b["id"], b["name"])
        elif b.get("type") == "function_call":
            found.setdefault(b["call_id"], b["name"])
    return list(found.items())


def tool_results_texted(message: BaseMessage) -> list[tuple[str, str]]:
    """(call id, result text) of every result a message carries, read from each format."""

    def text_of(value: Any) -> str:
        if isinstance(value, str):
            return value
        parts = [p["text"] for p in value if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(parts)

    if isinstance(message, ToolMessage):
        return [(message.tool_call_id, text_of(message.content))]
    if isinstance(message, AIMessage):
        return []
    out = []
    for b in _blocks(message):
        if b.get("type") == "tool_result":
            out.append((b["tool_use_id"], text_of(b["content"])))
        elif b.get("type") == "function_call_output":
            out.append((b["call_id"], text_of(b["output"])))
    return out


# -- last resort: small thresholds, tool units in the head, thinking on the newest turn --


@st.composite
def thinking_tool_turn(draw: st.DrawFn, ids: Callable[[], str]) -> list[BaseMessage]:
    """A tool turn whose assistant message starts with a thinking block (as Anthropic's)."""
    turn = draw(tool_turn(ids))
    ai = turn[0]
    content = ai.content if isinstance(ai.content, list) else [ai.content] if ai.content else []
    content = [b for b in content if not (isinstance(b, dict) and b.get("type") in REASONING)]
    body = draw(texts(1, 3_000))
    thinking = {"type": "thinking", "thinking": body, "signature": "sig" + str(len(body))}
    return [ai.model_copy(update={"content": [thinking, *content]}), *turn[1:]]


@st.composite
def head_tool_conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A task with a (parallel) tool unit right after it, so a ``head_count`` of 1-4 may
    hold it; a few more messages; and a newest tool turn of parallel calls that may
    open with a thinking block. Ids are unique on every message."""
    counter = iter(range(100_000))

    def ids() -> str:
        return str(next(counter))

    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(texts(1, 300)), id="sys"))
    out.append(HumanMessage(draw(texts(1, 800)), id="task"))
    # One or two parallel calls right after the task: within a head_count of 3-4.
    calls = [
        {"name": "bash", "args": {"command": draw(texts(1, 200))}, "id": f"c{ids()}"}
        for _ in range(draw(st.integers(1, 2)))
    ]
    out.append(AIMessage(draw(texts(0, 300)), tool_calls=calls, id=f"m{ids()}"))
    out += [ToolMessage(draw(texts(0, 3_000)), tool_call_id=c["id"]) for c in calls]
    if draw(st.booleans()):
        out += draw(tool_turn(lambda: f"c{ids()}"))
    for _ in range(draw(st.integers(0, 3))):
        out.append(HumanMessage(draw(texts(1, 1_500)), id=f"m{ids()}"))
    newest = thinking_tool_turn if draw(st.booleans()) else tool_turn
    out += draw(newest(lambda: f"c{ids()}"))
    for message in out[1:]:
        if message.id != "task":
            message.id = f"m{ids()}"
    return out


@st.composite
def small_pipelines(draw: st.DrawFn) -> ContextPipeline:
    """Pipelines at thresholds of a few hundred tokens, with ``head_count`` 1-4."""
    threshold = draw(st.one_of(st.integers(300, 600), st.integers(600, 1_500)))
    model = draw(st.sampled_from(["none", "none", "digest"]))
    return ContextPipeline(
        threshold=threshold,
        tail_budget=draw(st.integers(0, threshold // 2)),
        head_count=draw(st.sampled_from([1, 2, 3, 4, 3, 4])),
        model=None if model == "none" else DIGEST,
        tool_output_limit=draw(st.integers(0, 800)),
    )


@st.composite
def tight_cases(draw: st.DrawFn) -> tuple[list[BaseMessage], ContextPipeline]:
    """A :func:`head_tool_conversations` history and a pipeline whose threshold is just
    above (or at) the smallest request that keeps what must be kept, where truncation
    has the least room to spare; or a :func:`small_pipelines` one."""
    from tests.support.invariants import smallest_request_tokens

    history = draw(head_tool_conversations())
    if draw(st.integers(0, 3)) == 0:
        return history, draw(small_pipelines())
    # Half the time the head holds the tool unit after the task (when 4 messages do).
    opener = next(i for i, m in enumerate(history) if isinstance(m, AIMessage))
    covering = opener + 1 + len(history[opener].tool_calls)
    head_count = draw(st.sampled_from([1, 2, 3, 4, min(covering, 4), min(covering, 4)]))
    spare = draw(st.one_of(st.integers(0, 60), st.integers(0, 300)))
    threshold = smallest_request_tokens(history, head_count) + spare
    pipeline = ContextPipeline(
        threshold=threshold,
        tail_budget=draw(st.integers(0, threshold // 2)),
        head_count=head_count,
        model=draw(st.sampled_from([None, None, DIGEST])),
        tool_output_limit=draw(st.integers(0, 800)),
    )
    return history, pipeline
