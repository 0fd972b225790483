"""Write the notebooks from their cell sources (outputs stay out of git).

Run ``python notebooks/build.py`` after editing a notebook's cells here.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def write(name: str, cells: list[tuple[str, str]]) -> None:
    nb = new_notebook(
        cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(nb, HERE / f"{name}.ipynb")


QUICKSTART = [
    ("md", "# 01 · Quickstart: Pruner, Condenser, ContextPipeline\n\nA long agent history, trimmed the cheapest way first. Everything here runs offline: a fake chat model stands in for the remote one."),
    ("code", """from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_pipeline import Condenser, ContextPipeline, Pruner, estimate_tokens


def agent_history(steps: int = 30) -> list:
    messages = [SystemMessage("You are a coding agent."), HumanMessage("Fix the failing test in src/app.py")]
    for i in range(steps):
        call = {"name": "read_file" if i % 2 else "bash", "args": {"path": f"src/mod{i}.py", "command": f"pytest -k case{i}"}, "id": f"c{i}"}
        messages.append(AIMessage(f"Step {i}: checking. " + "Reasoning. " * 250, tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(f"case{i} output\\n" * 400, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


history = agent_history()
print(len(history), "messages,", estimate_tokens(history), "tokens")"""),
    ("md", "## Pruner: free, mechanical\n\nOutside the protected tail, tool results over 500 chars become a one-line brief built from the call's arguments; long assistant texts keep head and tail."),
    ("code", """pruned = Pruner(tail_budget=4000).invoke(history)
print(history[3].content[:60], "...")
print("->", pruned[3].content)
print(estimate_tokens(pruned), "tokens after pruning")"""),
    ("md", "## Condenser: one summary of the middle\n\nAny `BaseChatModel`, Runnable or callable can summarise. Here a fake model answers."),
    ("code", """from langchain_core.language_models import FakeListChatModel

summariser = FakeListChatModel(responses=["Actions: ran pytest and read modules 0-25. Results: case7 fails. Decisions: fix mod7. State: editing src/mod7.py."])
condensed = Condenser(summariser, tail_budget=4000).invoke(pruned)
for message in condensed[:3]:
    print(type(message).__name__, "|", str(message.content)[:100])
print(len(condensed), "messages,", estimate_tokens(condensed), "tokens")"""),
    ("md", "## ContextPipeline in an LCEL chain\n\n`prompt | pipeline | model`: the pipeline only acts above `threshold` and reports what it did."),
    ("code", """from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=summariser)
prompt = ChatPromptTemplate.from_messages([("system", "You are a coding agent."), MessagesPlaceholder("history")])
chain = prompt | pipeline | FakeListChatModel(responses=["Opening src/mod7.py"])
print(chain.invoke({"history": history[1:]}).content)

result = pipeline.compress(history)
print(result.report.stages, result.report.tokens_before, "->", result.report.tokens_after)
assert result.report.tokens_after <= 16_000"""),
]

REAL = [
    ("md", "# 04 · Real transcripts\n\nReplay a long, real agent run (a mini-swe-agent session on pvlib, bundled under the MIT licence) turn by turn, as the agent sent it, with and without the pipeline."),
    ("code", """from pathlib import Path

from langchain_context_pipeline import ContextPipeline
from langchain_context_pipeline.replay import replay
from langchain_context_pipeline.transcripts import load_transcript

examples = Path("..") / "examples" / "transcripts"
messages, fmt = load_transcript(examples / "minisweagent_pvlib-1707_deepseek.json")
pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model="digest")
run = replay(messages, pipeline)
print(len(run.turns), "model calls;", f"{run.tokens_without:,} tokens without, {run.tokens_with:,} with the pipeline")"""),
    ("code", """%matplotlib inline
import matplotlib.pyplot as plt

xs = [t.index for t in run.turns]
plt.figure(figsize=(8, 4))
plt.plot(xs, [t.tokens_without for t in run.turns], label="without")
plt.plot(xs, [t.tokens_with for t in run.turns], label="with the pipeline")
plt.axhline(pipeline.threshold, linestyle="--", color="grey", label="threshold")
plt.xlabel("message index of the model call")
plt.ylabel("tokens sent")
plt.legend()
plt.show()"""),
    ("md", "## What each stage saved, per transcript"),
    ("code", """rows = []
for path in sorted(examples.glob("*.json")):
    history, _ = load_transcript(path)
    report = pipeline.compress(history).report
    pruned = report.tokens_after_prune or report.tokens_before
    condensed = report.tokens_after_condense or pruned
    rows.append((path.stem[:40], report.tokens_before, pruned, condensed, report.tokens_after, report.briefed, report.condensed, report.dropped))

header = ("transcript", "before", "pruned", "condensed", "after", "briefs", "condensed msgs", "dropped")
print(" | ".join(header))
for row in rows:
    print(" | ".join(f"{v:,}" if isinstance(v, int) else v for v in row))
assert all(row[4] <= pipeline.threshold for row in rows)"""),
]

if __name__ == "__main__":
    write("01_quickstart", QUICKSTART)
    write("04_real_transcripts", REAL)
