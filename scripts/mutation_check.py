"""Show that each invariant's property test fails when the invariant is broken.

Each mutant breaks one invariant in a throw-away copy of the package; its property
test must then fail. Run with ``make mutation-check`` (takes a few minutes).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (name, file, text to replace, replacement, test that must fail: a test of
# test_properties.py, or ``file::test`` of another module of tests/unit_tests)
MUTANTS = [
    (
        "window: a correction below 1 enlarges the budget of what the provider never counted",
        "calibration.py",
        "        return max(1.0, self.correction)",
        "        return self.correction",
        "test_calibration.py::test_reported_usage_never_lets_a_request_past_the_threshold",
    ),
    (
        "references: truncation returns an equal copy of what it cannot cut",
        "truncate.py",
        "    return message if out == message else out",
        "    return out",
        "test_truncate.py::test_a_message_nothing_can_cut_is_kept_as_the_callers_object",
    ),
    (
        "references: arguments cut to nothing lose their marker",
        "_trim.py",
        "    return cut_call_arguments(message, lambda value: marker if value else value)",
        "    return cut_call_arguments(message, lambda value: cut_json(value, 0))",
        "test_truncate.py::test_arguments_cut_to_nothing_still_name_their_original",
    ),
    (
        "budget: no cutting of kept messages",
        "truncate.py",
        "    if used > budget:",
        "    if False:",
        "test_budget_holds",
    ),
    (
        "tool pairs: every message its own unit",
        "_units.py",
        "            end_of[start] = max(end_of[start], index + 1)",
        "            pass",
        "test_tool_pairs_never_split",
    ),
    (
        "system messages: condenser drops middle system messages",
        "condenser.py",
        "return [*head, *kept_system, summary",
        "return [*head, summary",
        "test_system_messages_kept",
    ),
    (
        "non-mutation: the pruner edits the caller's message",
        "pruner.py",
        "        stats.briefed += 1",
        "        stats.briefed += 1\n        message.content = line",
        "test_input_never_mutated",
    ),
    (
        "determinism: the removal note gets a random id",
        "_note.py",
        'f"context-note-{key.hexdigest()[:20]}"',
        '__import__("uuid").uuid4().hex',
        "test_deterministic",
    ),
    (
        "idempotence: under budget, a copy comes back",
        "pipeline.py",
        "return CompressionResult(work, report, carried if report.summary_reused",
        "return CompressionResult(list(work), report, carried if report.summary_reused",
        "test_idempotent",
    ),
    (
        "stable prefix: a cut string is cut again",
        "_trim.py",
        '    keep = limit - len(f"…[+{len(text)} chars{named}]")',
        "    keep = limit",
        "test_pruning_is_a_fixed_point",
    ),
    (
        "shapes: tool pairs: Anthropic tool_result blocks are not results",
        "_blocks.py",
        "        if isinstance(block, dict) and kind in RESULT_BLOCKS:",
        "        if False:",
        "test_properties_shapes.py::test_tool_pairs_intact_in_every_format",
    ),
    (
        "shapes: argument copies: tool-call blocks keep their full arguments",
        "_blocks.py",
        "and kind in CALL_BLOCKS and CALL_BLOCKS[kind][1] in block:",
        "and False:",
        "test_properties_shapes.py::test_tool_pairs_intact_in_every_format",
    ),
    (
        "shapes: budget: oversized lists are not cut",
        "_trim.py",
        "    if total <= trigger:\n        return [item for item, _ in items], total",
        "    if True:\n        return [item for item, _ in items], total",
        # 60 generated examples rarely hold a big list in the last unit: a regression test.
        "test_shapes.py::test_a_huge_list_argument_is_cut_not_the_system_prompt_or_the_task",
    ),
    (
        "shapes: reasoning: cutting a message edits its reasoning blocks",
        "truncate.py",
        "            if not drop_reasoning:\n                out.append(block)",
        "            if not drop_reasoning:\n                out.append({**block, 'data': 0})",
        "test_properties_shapes.py::test_reasoning_blocks_never_edited",
    ),
    (
        "system messages: a reused summary drops the system messages of its span",
        "pipeline.py",
        "            kept = [i for i in range(start, stop) if i in where.systems]",
        "            kept = []",
        "test_properties_loop.py::test_loop_keeps_systems_pairs_and_trusts_no_forgery",
    ),
    (
        "determinism: the pruning memo ignores edits in place",
        "pruner.py",
        "        if self.source() is not message or self.state != state:",
        "        if self.source() is not message:",
        "test_properties_loop.py::test_loop_output_equals_a_fresh_pipelines",
    ),
    (
        "determinism: the memo compares sets, dataclasses and models by identity",
        "_values.py",
        "    found = entries(value)\n    if found is None:\n"
        "        return (_TEXT, kind, _text(value))",
        "    found = None\n    if found is None:\n        return (_TEXT, kind, id(value))",
        "test_properties_loop.py::test_loop_output_equals_a_fresh_pipelines",
    ),
    (
        "trust: a mark is believed without its signature",
        "marks.py",
        "    if kind in WRITTEN_KINDS and not _verified(message, mark or {}):",
        "    if False:",
        "test_properties_loop.py::test_loop_keeps_systems_pairs_and_trusts_no_forgery",
    ),
    (
        "determinism: one circuit breaker for every conversation",
        "condenser.py",
        "self.breakers.get(conversation_key(messages))",
        'self.breakers.get("")',
        "test_trust.py::test_failures_in_one_conversation_do_not_change_another",
    ),
    (
        "pruning: tool results sent as blocks of a user message are never briefed",
        "pruner.py",
        "            return self._brief_blocks(message, calls, stats)",
        "            return message",
        "test_pruner.py::test_every_old_bulky_result_is_briefed_in_every_format",
    ),
    (
        "smallest request: the system messages are left out",
        "truncate.py",
        "    keep = set(where.systems) | set(range(*last))",
        "    keep = set(range(*last))",
        "test_properties_shapes.py::test_the_smallest_request_keeps_systems_pairs_and_the_newest_turn",
    ),
    (
        "smallest request: the newest unit loses its tool results",
        "truncate.py",
        "    keep = set(where.systems) | set(range(*last))",
        "    keep = set(where.systems) | {last[0]}",
        "test_properties_shapes.py::test_the_smallest_request_keeps_systems_pairs_and_the_newest_turn",
    ),
    (
        "last resort: a tool unit in the head is kept at any price",
        "truncate.py",
        "    if head_tools and used + note_cost > budget:",
        "    if False:",
        "test_properties_last_resort.py::test_no_budget_error_when_a_request_within_the_budget_exists",
    ),
    (
        "last resort: the newest turn's reasoning blocks are dropped to fit",
        "truncate.py",
        "        passes += [(i, i < last[0]) for i in order]",
        "        passes += [(i, True) for i in order]",
        "test_properties_last_resort.py::test_the_newest_turns_reasoning_reaches_the_provider_whole_and_first",
    ),
    (
        "last resort: a removal note replaces what costs no more than the note",
        "truncate.py",
        "        if gone <= note:",
        "        if False:",
        "test_properties_last_resort.py::test_a_removal_note_never_replaces_what_costs_no_more_than_the_note",
    ),
    (
        "async-only summarizer: not awaited under sync compress",
        "_model_call.py",
        "        if inspect.isawaitable(reply):\n",
        "        if False:\n",
        "test_state_between_calls.py::test_an_async_only_summarizer_writes_the_summary_under_sync_compress",
    ),
    (
        "determinism: the tool-schema count is cached by the tools' identities",
        "middleware.py",
        "        key = tools_fingerprint(tools)",
        "        key = tuple(id(t) for t in tools)",
        "test_middleware.py::test_the_request_stays_within_the_threshold_as_tool_schemas_change",
    ),
    (
        "summarizer: tool results sent as blocks are left out of its transcript",
        "digest.py",
        "        yield ToolResult(str(block[RESULT_BLOCKS[kind]]), text, error, len(others))",
        "        pass",
        "test_properties_summarizer.py::"
        "test_the_summarizer_is_shown_every_middle_tool_call_and_result_in_every_format",
    ),
]


def main() -> int:
    """Run every mutant; return 1 if any survived."""
    survived = 0
    only = sys.argv[1] if len(sys.argv) > 1 else ""  # run the mutants whose name has this
    for name, file, old, new, test in MUTANTS:
        if only not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp)
            package = "langchain_context_pipeline"
            shutil.copytree(ROOT / package, tree / package)
            shutil.copytree(ROOT / "tests", tree / "tests")
            shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
            target = tree / "langchain_context_pipeline" / file
            source = target.read_text(encoding="utf-8")
            if old not in source:
                print(f"MUTANT OUT OF DATE  {name}: pattern not found in {file}")
                survived += 1
                continue
            target.write_text(source.replace(old, new, 1), encoding="utf-8")
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-x",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    f"tests/unit_tests/{test}"
                    if "::" in test
                    else f"tests/unit_tests/test_properties.py::{test}",
                ],
                cwd=tree,
                env={"PYTHONPATH": str(tree), "HYPOTHESIS_PROFILE": "dev", "PATH": "/usr/bin:/bin"},
                capture_output=True,
                text=True,
                check=False,
            )
            caught = done.returncode == 1
            survived += not caught
            verdict = "caught  " if caught else "SURVIVED"
            print(f"{verdict} {name} ({test})")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
