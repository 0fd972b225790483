"""Time the default path (no summarizer: prune + hysteresis truncation) as a history grows.

Usage: ``python scripts/truncation_scaling.py [N ...]`` (default 5000 20000 50000
messages): one ``compress`` of an agent run of N messages at the default threshold,
and the index work of the removal notes (references computed), which must grow
linearly with N.
"""

from __future__ import annotations

import sys
import time

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.stages import digest as digest_module


def agent_run(n: int) -> list[BaseMessage]:
    """An agent run of ``n`` messages: a user request every ten, tool steps between."""
    history: list[BaseMessage] = [SystemMessage("You are a coding agent."), HumanMessage("task")]
    i = 0
    while len(history) < n:
        if i % 5 == 0:
            history.append(HumanMessage(f"now look at module {i}", id=f"h{i}"))
        call = {"name": "read_file", "args": {"path": f"src/m{i}.py"}, "id": f"c{i}"}
        history.append(AIMessage(f"reading m{i}", tool_calls=[call], id=f"a{i}"))
        history.append(ToolMessage(f"def f{i}():\n    pass\n" * 40, tool_call_id=f"c{i}"))
        i += 1
    return history[:n]


def main() -> None:
    """Print, for each size, the seconds of one compress and the references computed."""
    original = digest_module.message_ref
    refs = 0

    def counting(message: BaseMessage) -> str:
        nonlocal refs
        refs += 1
        return original(message)

    digest_module.message_ref = counting  # type: ignore[assignment]
    for n in [int(a) for a in sys.argv[1:]] or [5_000, 20_000, 50_000]:
        history = agent_run(n)
        refs = 0
        start = time.perf_counter()
        result = ContextPipeline().compress(history)
        seconds = time.perf_counter() - start
        print(
            f"{n:>7} messages: {seconds:6.2f} s, {refs:>7} index references, "
            f"{result.report.tokens_before} -> {result.report.tokens_after} tokens, "
            f"stages {result.report.stages}"
        )


if __name__ == "__main__":
    main()
