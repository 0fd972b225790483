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
        # Stable cell ids, so a rebuild changes only what the cells say.
        cells=[
            (new_markdown_cell if kind == "md" else new_code_cell)(src, id=f"{name[:2]}-{i:02d}")
            for i, (kind, src) in enumerate(cells)
        ],
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

summarizer = FakeListChatModel(responses=["Actions: ran pytest and read modules 0-25. Results: case7 fails. Decisions: fix mod7. State: editing src/mod7.py."])
condensed = Condenser(summarizer, tail_budget=4000).invoke(pruned)
for message in condensed[:3]:
    print(type(message).__name__, "|", str(message.content)[:100])
print(len(condensed), "messages,", estimate_tokens(condensed), "tokens")"""),
    ("md", "## ContextPipeline in an LCEL chain\n\n`prompt | pipeline | model`: the pipeline only acts above `threshold` and reports what it did."),
    ("code", """from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=summarizer)
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

from langchain_context_pipeline import DIGEST, ContextPipeline, load_transcript
from langchain_context_pipeline.core.replay import replay

examples = Path("..") / "examples" / "transcripts"
messages, fmt = load_transcript(examples / "minisweagent_pvlib-1707_deepseek.json")
pipeline = ContextPipeline(threshold=16_000, tail_budget=4000, model=DIGEST)
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
    prune, condense, cut = report.prune, report.condense, report.truncate
    pruned = prune.tokens_after if prune else report.tokens_before
    condensed = condense.tokens_after if condense else pruned
    rows.append((path.stem[:40], report.tokens_before, pruned, condensed, report.tokens_after, prune.briefed if prune else 0, condense.condensed if condense else 0, cut.trimmed if cut else 0))

header = ("transcript", "before", "pruned", "condensed", "after", "briefs", "condensed msgs", "dropped")
print(" | ".join(header))
for row in rows:
    print(" | ".join(f"{v:,}" if isinstance(v, int) else v for v in row))
assert all(row[4] <= pipeline.threshold for row in rows)"""),
]

SCRIPTED = '''from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return "\\n".join(f"{i:04d} def handler_{i}(request): return process(request)" for i in range(80))


class ScriptedAgentModel(BaseChatModel):
    """Stands in for the remote model: reads one file per step, then answers; records requests."""

    steps: int = 40
    seen: list = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if "nostream" in (run_manager.tags if run_manager else []):  # the pipeline's summarizer call
            reply = AIMessage("Summary: read the payment modules one by one; the bug is not found yet.")
        else:
            self.seen.append(list(messages))
            step = len(self.seen) - 1
            if step >= self.steps:
                reply = AIMessage(f"Done after {step} steps.")
            else:
                call = {"name": "read_file", "args": {"path": f"src/payments/module_{step}.py"}, "id": f"call-{step}"}
                reply = AIMessage(f"Step {step}: reading the next module. " + "Notes. " * 150, tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


model = ScriptedAgentModel()'''

HOOK = [
    ("md", "# 02 · LangGraph: the pre-model hook in a hand-built `StateGraph`\n\nA scripted tool-calling model stands in for the remote one (offline); it also writes the summaries. The hook is a node that runs before the model node: it keeps every model call under the threshold while the full history stays in the graph's state. For a prebuilt agent, LangGraph recommends `create_agent`, which takes `ContextPipelineMiddleware` (notebook 03); the deprecated `create_react_agent` takes the hook too (last section)."),
    ("code", SCRIPTED),
    ("md", "## The graph\n\nThe hook writes the compressed view to `llm_input_messages`; the model node sends it, after its system prompt. The hook cannot see that prompt or the tools, so it is given both: the budget covers the whole request."),
    ("code", """from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_context_pipeline import estimate_tokens, is_pipeline_summary
from langchain_context_pipeline.langgraph import ContextPipelineState, create_pre_model_hook

PROMPT = "You are a careful coding agent."
tools = [read_file]


class State(ContextPipelineState):
    llm_input_messages: list  # the compressed view the hook writes for the model


hook = create_pre_model_hook(threshold=8000, tail_budget=2000, model=model, system_prompt=PROMPT, tools=tools)
llm = model.bind_tools(tools)


def call_model(state: State) -> dict:
    return {"messages": [llm.invoke([SystemMessage(PROMPT), *state["llm_input_messages"]])]}


builder = StateGraph(State)
builder.add_node("compress", hook)
builder.add_node("agent", call_model)
builder.add_node("tools", ToolNode(tools))
builder.add_edge(START, "compress")
builder.add_edge("compress", "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "compress")
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "demo"}, "recursion_limit": 200}
result = graph.invoke({"messages": [("user", "Find the bug in src/payments")]}, config)
print(result["messages"][-1].content)"""),
    ("md", "## What the model saw at each step\n\nTokens sent per call (the system prompt included), and whether a summary stood in for the middle turns. The conversation's messages and what the hook reserved for the prompt and the tool's schema stay within the threshold."),
    ("code", """def conversation(request: list) -> list:
    return [m for m in request if not isinstance(m, SystemMessage)]


print("step  tokens  messages  summary")
for step, request in enumerate(model.seen):
    summary = any(is_pipeline_summary(m) for m in request)
    print(f"{step:>4}  {estimate_tokens(request):>6}  {len(request):>8}  {'yes' if summary else '-'}")
print("reserved for the system prompt and the tool's schema:", hook.reserved_tokens, "tokens")
assert max(estimate_tokens(conversation(r)) for r in model.seen) + hook.reserved_tokens <= 8000"""),
    ("md", "## Nothing is lost\n\nThe checkpoint holds every message; the carried summary sits in the `context_pipeline_summary` state key."),
    ("code", """state = graph.get_state(config).values
print(len(state["messages"]), "messages in the checkpoint;", estimate_tokens(state["messages"]), "tokens")
print(state["context_pipeline_summary"]["text"][:200])"""),
    ("md", "## With `create_react_agent` (deprecated by LangGraph)\n\n`create_react_agent` takes the same hook as `pre_model_hook=` and sends the compressed view itself. LangGraph 1.0 deprecates it in favour of `langchain.agents.create_agent` (notebook 03), and says so with a `DeprecationWarning` when it is called: the warning below is left visible on purpose."),
    ("code", """from langgraph.prebuilt import create_react_agent

react_model = ScriptedAgentModel(steps=12)
react_hook = create_pre_model_hook(threshold=8000, tail_budget=2000, model=react_model, system_prompt=PROMPT, tools=tools)
agent = create_react_agent(react_model, tools, prompt=PROMPT, pre_model_hook=react_hook)  # warns: deprecated
result = agent.invoke({"messages": [("user", "Find the bug in src/payments")]}, {"recursion_limit": 100})
largest = max(estimate_tokens(conversation(r)) for r in react_model.seen)
print(result["messages"][-1].content, "| largest conversation sent:", largest, "tokens")
assert largest + react_hook.reserved_tokens <= 8000"""),
]

MIDDLEWARE = [
    ("md", "# 03 · LangChain v1 `create_agent` with `ContextPipelineMiddleware`\n\nThe middleware edits only the model request; the system prompt and the tools' schemas count toward the budget."),
    ("code", SCRIPTED),
    ("code", """from langchain.agents import create_agent

from langchain_context_pipeline import estimate_tokens
from langchain_context_pipeline.middleware import ContextPipelineMiddleware

middleware = ContextPipelineMiddleware(threshold=8000, tail_budget=2000, model=model)
agent = create_agent(model, [read_file], system_prompt="You are a careful coding agent.", middleware=[middleware])
result = agent.invoke({"messages": [("user", "Find the bug in src/payments")]}, {"recursion_limit": 200})
print(result["messages"][-1].content)
print(len(result["messages"]), "messages kept in the agent's state")"""),
    ("code", """sizes = [estimate_tokens(r) for r in model.seen]
print("largest request:", max(sizes), "tokens of messages, the system prompt included (the tool schemas come on top)")
print("per step:", sizes)
assert max(sizes) <= 8000"""),
]

DEEP_SCRIPTED = """from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

TASK = "Audit src/payments: which handlers skip validation?"


@tool
def lookup(query: str) -> str:
    \"\"\"Look a handler up in the code base.\"\"\"
    return "\\n".join(f"{i:04d} handler {query}: validates, then process(request)" for i in range(60))


class ScriptedDeepModel(BaseChatModel):
    \"\"\"Stands in for the remote model: one script per conversation (the main agent's and
    the subagent's), keyed by its task; delegates once to the researcher; records requests.\"\"\"

    seen: dict = {}

    @property
    def _llm_type(self) -> str:
        return "scripted-deep"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if "nostream" in (run_manager.tags if run_manager else []):  # the pipeline's summarizer call
            reply = AIMessage("Summary: looked up the payment handlers one by one; none skips validation yet.")
            return ChatResult(generations=[ChatGeneration(message=reply)])
        asks = [m.content for m in messages if isinstance(m, HumanMessage)]
        key = "main" if TASK in asks else "researcher"
        self.seen.setdefault(key, []).append(list(messages))
        step = len(self.seen[key]) - 1
        if step >= (30 if key == "main" else 20):
            reply = AIMessage(f"{key}: done after {step} steps.")
        elif key == "main" and step == 10:
            args = {"description": "Read the refund handlers and report.", "subagent_type": "researcher"}
            reply = AIMessage("Delegating the refunds.", tool_calls=[{"name": "task", "args": args, "id": f"{key}-{step}"}])
        else:
            call = {"name": "lookup", "args": {"query": f"{key} handler {step}"}, "id": f"{key}-{step}"}
            reply = AIMessage(f"Step {step}: next handler. " + "Notes. " * 150, tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


model = ScriptedDeepModel(profile={"max_input_tokens": 16000})
researcher = {"name": "researcher", "description": "Reads code and reports.", "system_prompt": "You read code and report."}"""

DEEPAGENTS = [
    ("md", "# 05 · deepagents: the pipeline as a deep agent's context manager\n\n`create_deep_agent` puts its own summarisation in a middleware slot named `SummarizationMiddleware`. `DeepAgentContextMiddleware` takes that slot, for the main agent and its subagents. A scripted model stands in for the remote one (offline) and also writes the summaries."),
    ("code", DEEP_SCRIPTED),
    ("code", """from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_pipeline.deepagents import DeepAgentContextMiddleware, create_deep_agent

context = DeepAgentContextMiddleware(threshold=("fraction", 0.75), tail_budget=3000, model=model)
agent = create_deep_agent(model, [lookup], context=context, subagents=[researcher], checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "deep"}, "recursion_limit": 500}"""),
    ("md", "## Watching it in the stream\n\nEach call that compresses writes one event to the stream (`stream_mode=\"custom\"`); calls that need nothing write none."),
    ("code", """events = []
for mode, chunk in agent.stream({"messages": [("user", TASK)]}, config, stream_mode=["updates", "custom"]):
    if mode == "custom" and chunk.get("type") == "context_pipeline":
        events.append(chunk)
        done = "summary written" if chunk["summary_written"] else "summary reused" if chunk["summary_reused"] else ""
        print(f"{chunk['tokens_before']:>6} -> {chunk['tokens_after']:>5} tokens  {'+'.join(chunk['stages']) or '-':<14} {done}")
print(len(events), "compressing calls out of", sum(len(v) for v in model.seen.values()))"""),
    ("md", "## Only the pipeline compressed\n\ndeepagents wrote no summary of its own, and every request, the subagent's included, kept its task."),
    ("code", """state = agent.get_state(config).values
print("deepagents summary event:", state.get("_summarization_event"))
print("main agent:", state["messages"][-1].content)
for key, requests in model.seen.items():
    task = TASK if key == "main" else "Read the refund handlers and report."
    print(key, "-", len(requests), "calls; the task in each:", all(any(m.content == task for m in r) for r in requests))
assert state.get("_summarization_event") is None and events"""),
]

RECALL_SCRIPTED = """import re

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_context_pipeline.messages.references import REF_PATTERN

BIG_PATH = "src/payments/ledger.py"
BIG = "\\n".join(f"{i:05d} entry_{i} = post(account={i % 97}, amount={i * 3})" for i in range(400))


@tool
def read_file(path: str) -> str:
    \"\"\"Read a source file.\"\"\"
    if path == BIG_PATH:
        return BIG
    return "\\n".join(f"{i:04d} def handler_{i}(request): return process(request)" for i in range(80))


def call(name: str, args: dict, cid: str) -> AIMessage:
    return AIMessage(f"Step {cid}. " + "Notes. " * 150, tool_calls=[{"name": name, "args": args, "id": cid}])


class RecallingModel(BaseChatModel):
    \"\"\"Stands in for the remote model: reads the ledger, then other files; at step
    ``recall_at`` it finds the ledger's reference in its brief and recalls it, page by page.\"\"\"

    recall_at: int = 6
    seen: list = []
    pages: list = []
    found: dict = {}

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        step = len(self.seen) - 1
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "recall":
            self.pages.append(last.content)
            more = re.search(r"offset=(\\d+)\\) for the next page\\]$", last.content)
            if more:
                reply = call("recall", {"ref": self.found["ref"], "offset": int(more.group(1))}, f"recall-{step}")
            else:
                reply = AIMessage("Line 00321 of the ledger posts to account 30: that is the bug.")
        elif step == 0:
            reply = call("read_file", {"path": BIG_PATH}, "call-ledger")
        elif step == self.recall_at:
            brief = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "call-ledger")
            self.found["brief"] = brief.content
            self.found["ref"] = REF_PATTERN.search(brief.content).group(1)
            reply = call("recall", {"ref": self.found["ref"]}, f"recall-{step}")
        else:
            reply = call("read_file", {"path": f"src/payments/module_{step}.py"}, f"call-{step}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


model = RecallingModel()"""

RECALL = [
    ("md", "# 06 · Nothing is lost for good: the `recall` tool\n\nPruning turns old tool results into one-line briefs, and condensing and truncation replace whole turns. Each brief, cut, summary and removal note names what it replaced with a short reference, `ref=ab12cd34`. The agent reads the original back with the `recall` tool, page by page. Offline: a scripted model stands in for the remote one."),
    ("code", RECALL_SCRIPTED),
    ("md", "## An agent with the middleware\n\n`ContextPipelineMiddleware` adds `recall` to the agent's tools by itself (`recall_tool=False` leaves it out). In the middleware the full history stays in the agent's state, so `recall` reads the original from there: no copy, no store."),
    ("code", """from langchain.agents import create_agent

from langchain_context_pipeline import estimate_tokens
from langchain_context_pipeline.middleware import ContextPipelineMiddleware

middleware = ContextPipelineMiddleware(threshold=8000, tail_budget=2000)
print("tools the middleware adds:", [t.name for t in middleware.tools])
agent = create_agent(model, [read_file], middleware=[middleware])
result = agent.invoke({"messages": [("user", "Find the wrong posting in the ledger.")]}, {"recursion_limit": 200})
print(result["messages"][-1].content)"""),
    ("md", "## What the model saw, and what it got back\n\nBy step 6 the ledger (step 0) is a brief in the request; its reference is all the model needs."),
    ("code", """print("brief at step", model.recall_at, ":", model.found["brief"])
print(len(BIG), "characters in the original, recalled in", len(model.pages), "pages")
print(model.pages[0][:200], "...")
print("...", model.pages[-1][-120:])

body = "".join(page.split("\\n", 1)[1].rsplit("\\n", 1)[0] for page in model.pages)
assert body == BIG  # byte for byte
assert max(estimate_tokens(r) for r in model.seen) <= 8000
print("recalled byte for byte; largest request:", max(estimate_tokens(r) for r in model.seen), "tokens")"""),
    ("md", "## Where the originals live\n\n- The hook's default ephemeral mode and the middleware: graph state already holds them.\n- The hook's `persist` mode (which rewrites `messages`) and LCEL chains: a LangGraph store, `InMemoryStore` on one machine or `PostgresStore` when several workers share threads: `create_react_agent(model, [*tools, create_recall_tool()], pre_model_hook=hook, store=store)`. A reference resolves only within its own `thread_id`."),
]

if __name__ == "__main__":
    write("01_quickstart", QUICKSTART)
    write("02_langgraph_pre_model_hook", HOOK)
    write("03_create_agent_middleware", MIDDLEWARE)
    write("04_real_transcripts", REAL)
    write("05_deepagents", DEEPAGENTS)
    write("06_recall", RECALL)
