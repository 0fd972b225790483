"""References: every brief, cut, summary and removal note names what it replaced.

The property test runs generated conversations through generated pipelines
(limits large enough for a reference to fit) and checks that every message the
pass replaced is named by a reference written in the output, and that the
reference resolves to that very original.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_pipeline import DIGEST, ContextPipeline, hard_truncate, is_pipeline_summary
from langchain_context_pipeline.messages.references import (
    find_refs,
    format_ref,
    message_ref,
    parse_ref,
    resolve,
    span_ref,
    written_text,
)
from tests.support.generated import conversations, invoke_or_none, summarizer


@st.composite
def pipelines(draw: st.DrawFn) -> ContextPipeline:
    threshold = draw(st.integers(2_000, 40_000))
    model_kind = draw(st.sampled_from(["none", "digest", "model", "failing"]))
    model: Any = {
        "none": None,
        "digest": DIGEST,
        "model": summarizer(draw(st.integers(1, 20_000)), fail=False),
        "failing": summarizer(10, fail=True),
    }[model_kind]
    return ContextPipeline(
        threshold=threshold,
        tail_budget=draw(st.integers(0, threshold - 1)),
        head_count=draw(st.integers(0, 4)),
        model=model,
        tool_output_limit=draw(st.integers(100, 1_000)),
        tool_args_limit=draw(st.integers(64, 400)),
    )


def with_ids() -> st.SearchStrategy[list[BaseMessage]]:
    """Generated conversations whose messages have ids, as in any LangGraph state.

    (Without ids, identical messages share one content reference.)
    """
    return conversations().filter(lambda messages: all(m.id for m in messages))


def named_in(output: list[BaseMessage]) -> list[str]:
    return [ref for m in output for ref in find_refs(written_text(m))]


@given(with_ids(), pipelines())
def test_every_replaced_message_is_named_and_resolves(
    messages: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    out = invoke_or_none(pipeline, messages)  # None: the system messages alone are over budget
    if out is None:
        return
    kept = {id(m) for m in out}
    refs = named_in(out)
    for original in messages:
        if id(original) in kept:
            continue
        resolved = [x for ref in refs for x in (resolve(ref, messages) or [])]
        assert any(x is original or x == original for x in resolved), (
            f"{original.type} {message_ref(original)} replaced but not named; refs: {refs}"
        )


@given(conversations(), pipelines())
def test_references_keep_the_output_a_fixed_point(
    messages: list[BaseMessage], pipeline: ContextPipeline
) -> None:
    once = invoke_or_none(pipeline, messages)  # None: the system messages alone are over budget
    if once is None:
        return
    assert pipeline.invoke(once) is once
    assert named_in(pipeline.invoke(list(messages))) == named_in(once)  # deterministic


def test_reference_comes_from_the_id_or_the_content() -> None:
    assert message_ref(HumanMessage("a", id="x")) == message_ref(HumanMessage("b", id="x"))
    assert message_ref(HumanMessage("a")) == message_ref(HumanMessage("a"))
    assert message_ref(HumanMessage("a")) != message_ref(HumanMessage("b"))
    assert message_ref(HumanMessage("a")) != message_ref(AIMessage("a"))
    ref = message_ref(ToolMessage("out", tool_call_id="c1"))
    assert len(ref) == 8 and int(ref, 16) >= 0
    assert format_ref(ref) == f"ref={ref}"


def test_parse_accepts_what_an_agent_writes_and_rejects_the_rest() -> None:
    assert parse_ref("ab12cd34") == ("ab12cd34", None)
    assert parse_ref(" ref=AB12CD34 ") == ("ab12cd34", None)
    assert parse_ref("`ab12cd34..ef567890`") == ("ab12cd34", "ef567890")
    for bad in ("", "ab12", "zz12cd34", "ab12cd34..", "ab12cd34;drop", "../etc/passwd"):
        assert parse_ref(bad) is None, bad


def test_span_resolves_through_a_prior_summary() -> None:
    history = [
        HumanMessage(f"Step {i}: read the parser module and note what fails. " * 20, id=f"q{i}")
        for i in range(8)
    ]
    pipeline = ContextPipeline(threshold=1500, tail_budget=400, head_count=1, model=DIGEST)
    out = pipeline.invoke(history)
    summary = next(m for m in out if is_pipeline_summary(m))
    (span,) = [r for r in find_refs(str(summary.content)) if ".." in r]
    covered = resolve(span, history)
    assert covered is not None and covered == [m for m in history[1:] if m not in out]
    # A later span that starts with that summary reaches back to what it stood for.
    later = resolve(span_ref([summary, history[-1]]), history)
    assert later is not None and later[0] is history[1] and later[-1] is history[-1]


def test_hard_truncation_note_names_the_removed_span() -> None:
    history = [HumanMessage("task", id="t")] + [
        HumanMessage("word " * 80, id=f"m{i}") for i in range(10)
    ]
    out = hard_truncate(history, threshold=300, head_count=1)
    note = out[1]
    (span,) = [r for r in find_refs(str(note.content)) if ".." in r]
    removed = [m for m in history if m not in out]
    assert resolve(span, history) == removed


def test_a_brief_without_room_for_its_reference_stays_within_the_limit() -> None:
    path = "src/" + "components/" * 29 + "a.py"  # 300 chars
    call = {"name": "read_file", "args": {"path": path}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("x" * 5000, tool_call_id="c1", id="t"),
        HumanMessage("next " * 200),
    ]
    for limit in (25, 40, 100):
        # low_water=1: pruning is enough, no compaction to the low-water mark drops the brief.
        out = ContextPipeline(
            threshold=400, tail_budget=100, tool_output_limit=limit, low_water=1.0
        ).invoke(history)
        brief = str(out[2].content)
        assert len(brief) <= limit
        assert (format_ref(message_ref(history[2])) in brief) == (limit >= 33)
