"""Render the gathered figures as BENCHMARKS.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.window import low_water_markdown, window_markdown

NOTES = Path(__file__).resolve().parent / "NOTES.md"
"""Hand-written analysis embedded at the end of the report, if present."""


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _k(window: str) -> str:
    return f"{int(window) // 1000}k"


def _summary_rows(data: dict[str, Any], config: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, t in data["totals"].items():
        r = t["retention"]
        rows.append(
            [
                config[key]["label"],
                _num(t["input_tokens"]),
                _pct(t["cached_share"], 0),
                f"**{_pct(t['cost_share'])}**",
                f"{t['summarizer_calls']} ({t['summaries_written']})",
                f"{t['overflows']} ({t['max_input'] / data['window']:.2f}x)",
                f"{t['orphans']} / {t['unanswered']}",
                str(t["task_lost"]),
                f"{_pct(r['args'], 0)} / {_pct(r['users'], 0)} / {_pct(r['result'], 0)}",
                f"{_num(t['overhead_us']['median'])} / {_num(t['overhead_us']['p95'])}",
            ]
        )
    return rows


SUMMARY_HEADER = [
    "strategy",
    "input tokens",
    "cached",
    "cost vs none",
    "summarizer calls (summaries written)",
    "overflows (largest / window)",
    "orphans / unanswered",
    "requests without the task",
    "retention: args / users / test result",
    "overhead µs median / p95",
]


def summary_markdown(out: dict[str, Any]) -> str:
    """The summary tables alone (also printed by the command)."""
    config = out["config"]["strategies"]
    lines: list[str] = []
    for window, data in out["windows"].items():
        lines.append(
            f"### Window {_k(window)} (tail {data['tail_budget']:,}), "
            f"{data['totals']['none']['requests']} requests"
        )
        lines.append("")
        lines += _table(SUMMARY_HEADER, _summary_rows(data, config))
        lines.append("")
    return "\n".join(lines)


RECOVERABLE_HEADER = [
    "strategy",
    "args: in request → recoverable",
    "users: in request → recoverable",
    "tool results: in request → recoverable",
    "all items: in request → recoverable",
]


def _recoverable_rows(data: dict[str, Any], config: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, t in data["totals"].items():
        r = t.get("recoverable")
        if r is None:
            continue
        in_request = {
            "args": _share(r, "args_in", "args_total"),
            "users": _share(r, "users_in", "users_total"),
        }
        rows.append(
            [
                config[key]["label"],
                f"{_pct(in_request['args'], 0)} → {_pct(r['args'], 0)}",
                f"{_pct(in_request['users'], 0)} → {_pct(r['users'], 0)}",
                f"{_pct(r['results_in_request'], 0)} → {_pct(r['results'], 0)}",
                f"{_pct(r['overall_in_request'])} → **{_pct(r['overall'])}**",
            ]
        )
    return rows


def _share(r: dict[str, Any], kept: str, total: str) -> float | None:
    return r[kept] / r[total] if r[total] else None


def recoverable_markdown(out: dict[str, Any]) -> str:
    """Recoverable retention per window: what the final requests hold or can read back."""
    config = out["config"]["strategies"]
    lines = [
        "Items of the history, at each transcript's final request: tool-call arguments "
        "(paths, commands, queries, URLs) and user messages as plain retention counts them, "
        "and every tool result, whole. 'In request': its text is in the final request; "
        "'recoverable': in the request, or reachable from it: ours resolves the references "
        "its briefs, cuts, summaries and notes write (`ref=…`, read back by the `recall` "
        "tool) against the full history; deepagents counts the offloaded conversation-history "
        "file its summary names and the large tool results (over 80,000 characters, tools it "
        "does not exclude) its filesystem middleware would write to files; the other peers "
        "keep nothing outside the request.",
        "",
    ]
    for window, data in out["windows"].items():
        lines += [f"### Window {_k(window)}", ""]
        lines += _table(RECOVERABLE_HEADER, _recoverable_rows(data, config))
        lines.append("")
    return "\n".join(lines)


def _targets(out: dict[str, Any]) -> list[str]:
    rows = [
        [
            t["target"],
            t["window"],
            t["strategy"],
            t["value"],
            t["need"],
            "✅ met" if t["met"] else "❌ missed",
            t["note"],
        ]
        for t in out["targets"]
    ]
    met = sum(1 for t in out["targets"] if t["met"])
    lines = [f"{met} of {len(out['targets'])} met.", ""]
    lines += _table(["target", "window", "ours", "value", "needed", "", "note"], rows)
    return lines


def _per_transcript(out: dict[str, Any]) -> list[str]:
    config = out["config"]["strategies"]
    keys = list(config)
    lines: list[str] = []
    for window, data in out["windows"].items():
        per = data["per_transcript"]
        names = list(per["none"])
        lines += [f"### Window {_k(window)}: cost vs no management", ""]
        rows = [[n] + [_pct(per[k][n]["cost_share"], 0) for k in keys] for n in names]
        lines += _table(["transcript"] + [config[k]["label"] for k in keys], rows)
        lines += [
            "",
            f"### Window {_k(window)}: overflows · summarizer calls · orphans/unanswered",
            "",
        ]
        rows = []
        for n in names:
            cells = []
            for k in keys:
                s = per[k][n]
                cell = f"{s['overflows']} · {s['summarizer_calls']}"
                if s["orphans"] or s["unanswered"]:
                    cell += f" · {s['orphans']}/{s['unanswered']}"
                if s["errors"]:
                    cell += f" · {s['errors']} errors"
                cells.append(cell)
            rows.append([n, *cells])
        lines += _table(["transcript"] + [config[k]["label"] for k in keys], rows)
        lines += [
            "",
            f"### Window {_k(window)}: retention in the final request (args / users / test result)",
            "",
        ]
        rows = []
        for n in names:
            cells = []
            for k in keys:
                r = per[k][n]["retention"]
                parts = [
                    f"{r['args_kept']}/{r['args_total']}" if r["args_total"] else "-",
                    f"{r['users_kept']}/{r['users_total']}" if r["users_total"] else "-",
                    ("✓" if r["result_kept"] else "✗") if r["result_total"] else "-",
                ]
                cells.append(" ".join(parts))
            rows.append([n, *cells])
        lines += _table(["transcript"] + [config[k]["label"] for k in keys], rows)
        lines.append("")
    return lines


def _cost_parts(out: dict[str, Any]) -> list[str]:
    config = out["config"]["strategies"]
    lines: list[str] = []
    for window, data in out["windows"].items():
        none = data["totals"]["none"]
        floor = 1 - (none["cost_beyond_window"] / none["cost"] if none["cost"] else 0)
        lines += [
            f"### Window {_k(window)}",
            "",
            f"{none['requests_beyond_window']} of {none['requests']} requests have a history "
            f"larger than the window. The other requests carry {_pct(floor)} of no "
            "management's cost: a strategy that passes requests within the window through "
            "unchanged (ours, by design) cannot cost less than that in total, whatever it does "
            "beyond the window. The column 'beyond the window' compares each strategy with no "
            "management on those requests only: the part a strategy controls.",
            "",
        ]
        rows = []
        for key, t in data["totals"].items():
            p = t["cost_parts"]
            rows.append(
                [
                    config[key]["label"],
                    _pct(p["uncached"]),
                    _pct(p["cached"]),
                    _pct(p["summarizer_input"]),
                    _pct(p["summarizer_output"]),
                    f"**{_pct(t['cost_share'])}**",
                    _pct(t["cost_within_share"]),
                    _pct(t["cost_beyond_share"]),
                    _num(t["input_tokens"] - t["cached_tokens"]),
                ]
            )
        lines += _table(
            [
                "strategy",
                "uncached input",
                "0.1 x cached",
                "summarizer input",
                "4 x summarizer output",
                "total",
                "of which: requests within the window",
                "beyond the window, vs none there",
                "uncached tokens",
            ],
            rows,
        )
        lines.append("")
        stages = data.get("our_stages", {})
        for key, tally in stages.items():
            parts = ", ".join(f"{name}: {n}" for name, n in tally.items())
            lines.append(f"- {config[key]['label']}, stages per request: {parts}")
        lines.append("")
    return lines


def _tiktoken(out: dict[str, Any]) -> list[str]:
    config = out["config"]["strategies"]
    if not out["meta"]["tiktoken"]["measured"]:
        return [f"Not measured: {out['meta']['tiktoken']['note']}.", ""]
    lines = [
        f"Counted with {out['meta']['tiktoken']['note']} (the project's `tiktoken_counter`).",
        "",
    ]
    windows = list(out["windows"])
    header = ["strategy"]
    for w in windows:
        header += [f"input tokens {_k(w)}", f"cost vs none {_k(w)}", f"(estimate {_k(w)})"]
    rows = []
    for key in config:
        row = [config[key]["label"]]
        for w in windows:
            t = out["windows"][w]["totals"][key]
            row += [
                _num(t["tiktoken"]["input_tokens"]),
                _pct(t["tiktoken"]["cost_share"]),
                _pct(t["cost_share"]),
            ]
        rows.append(row)
    return [*lines, *_table(header, rows), ""]


def _real_rows(
    totals: dict[str, Any], config: dict[str, Any], tokenizers: list[str], window: int
) -> list[list[str]]:
    rows = []
    for key, t in totals.items():
        real = t.get("real_tokens")
        if real is None:
            continue
        own = real["own_counter"]
        largest = max(real["max"].values(), default=0)
        rows.append(
            [
                config[key]["label"],
                f"`{own}`" if own else "none",
                str(real["own_overflows"]) if own else "n/a",
                str(t["overflows"]),
                *(f"**{real['overflows'][name]}**" for name in tokenizers),
                f"{largest / window:.2f}x",
            ]
        )
    return rows


def _real_header(tokenizers: list[str]) -> list[str]:
    return [
        "strategy",
        "its own counter",
        "overflows by its own count",
        "by `estimate_tokens`",
        *tokenizers,
        "largest real request / window",
    ]


def real_tokens_markdown(out: dict[str, Any]) -> str:
    """Overflows in real tokens on the transcripts and the token corpus (printed too)."""
    meta = out["meta"].get("real_tokens")
    if not meta or not meta["measured"]:
        note = meta["note"] if meta else "not measured"
        return f"Not measured: {note}.\n"
    config = out["config"]["strategies"]
    tokenizers: list[str] = meta["tokenizers"]
    lines = [
        f"Requests above the window, counted by real tokenizers ({meta['note']}; "
        f"{meta.get('distinct_messages', 0):,} distinct messages, each tokenized once per "
        f"tokenizer, {meta.get('tokenize_s', 0):.0f} s), next to the strategy's own count "
        "and the bench's `estimate_tokens`. A request's real tokens: per message, the "
        "tokenizer's count of the parts a provider sends (`countable_parts`: string content, "
        "text and other blocks, each tool call as name, JSON arguments and id), 1,600 per "
        f"image, 3,000 per binary file, plus {meta['message_overhead']} tokens per message for "
        "its role and framing (`MESSAGE_OVERHEAD_TOKENS`); plus "
        f"{meta['reply_priming']} per request to prime the reply: what "
        "`tests/unit_tests/test_real_token_budget.py` assumes. Own count: the counter the "
        "strategy decides by, over the whole model input it returns (system prompt "
        "included): `estimate_tokens` for ours and `trim_messages`, "
        "`count_tokens_approximately` for the other peers (4 characters per token, 3 tokens "
        "per message; `SummarizationMiddleware` counts the state without the system prompt, "
        "so its own count here can pass the window where its check did not).",
        "",
    ]
    for window, data in out["windows"].items():
        lines += [
            f"### Transcripts, window {_k(window)} ({data['totals']['none']['requests']} requests)",
            "",
        ]
        lines += _table(
            _real_header(tokenizers), _real_rows(data["totals"], config, tokenizers, int(window))
        )
        lines.append("")
    corpus = out.get("corpus")
    if corpus:
        names = [c["name"] for c in corpus["conversations"]]
        kinds = sorted({n.split("__", 1)[0] for n in names})
        lines += [
            f"### Token corpus: {len(names)} conversations ({', '.join(kinds)})",
            "",
            "Each sample of `tests/data/token_corpus/` as the real-token tests build it: a "
            f"task, then per {corpus['chunk_chars']:,}-character piece an assistant message "
            "(its first 300 characters) calling `read_file` and the piece as the result, then "
            "a user message with the sample's last 400 characters. Replayed like the "
            "transcripts at smaller windows (the largest conversation is about 34k tokens by "
            "the estimate, 21k by cl100k_base; the multilingual and CJK ones, a single tool "
            "result each, at most about 3k real tokens, so only the 2k window puts some of "
            "them over).",
            "",
        ]
        keys = list(config)
        for window, data in corpus["windows"].items():
            lines += [
                f"#### Corpus, window {_k(window)} (tail {data['tail_budget']:,}), "
                f"{data['requests']} requests",
                "",
            ]
            lines += _table(
                _real_header(tokenizers),
                _real_rows(data["totals"], config, tokenizers, int(window)),
            )
            lines += [
                "",
                f"By kind of sample, window {_k(window)}: overflows by the tokenizer that "
                "counts the most of them.",
                "",
            ]
            rows = [
                [kind] + [str(row.get(k, 0)) for k in keys] for kind, row in data["by_kind"].items()
            ]
            lines += _table(["kind"] + [config[k]["label"] for k in keys], rows)
            lines.append("")
            over = data["ours_overflowing"]
            if over:
                lines.append("Ours over the window:")
                lines += [
                    f"- {config[o['strategy']]['label']} on `{o['conversation']}`: "
                    + ", ".join(f"{n} {o['overflows'][n]}" for n in tokenizers)
                    + f", own count {o['own_overflows']}"
                    for o in over
                ]
            else:
                lines.append(
                    f"Ours (budgeted) over the window at {_k(window)}: on no conversation, by "
                    "no tokenizer and not by its own count."
                )
            lines.append("")
    return "\n".join(lines)


def _scaling(out: dict[str, Any]) -> list[str]:
    scaling = out.get("scaling")
    if not scaling:
        return ["Not measured.", ""]
    intro = [
        "Each history is the system prompt and task of a real transcript, then tool-call units "
        "and turns drawn at random (fixed seed) from the native-tool transcripts, with fresh "
        "ids. On the same list: `count_tokens_approximately(history)`; `trim_messages("
        'strategy="last", max_tokens=total // 4, start_on="human", include_system=True, '
        "token_counter=count_tokens_approximately)`; ours no-op: `ContextPipeline(threshold="
        "total + 1).compress(history)`; ours prune path: `ContextPipeline(threshold=total - 1, "
        "tail_budget=8000).compress(history)` (pruning alone gets under it: checked below), "
        "called again and again on the same list as an agent does turn after turn, so the "
        "Pruner's memo of already-pruned messages is warm; `ours_prune_cold` empties that memo "
        "before each call (a new history in a process that has read its messages before); "
        "`ours_prune_fresh` compresses, each call, a new copy of the history read back from "
        "its JSON outside the timing, as a checkpointer hands it back at the start of a turn "
        "(every message and every string in it a new object, so no memo keyed by a message "
        "hits: the first call of each `invoke`). "
        "Sizes and operations are timed round-robin, each size's repeats spread over the whole "
        "run, after a warm-up, with the objects that existed before timing frozen out of the "
        "garbage collector (`gc.freeze`); peak memory of one call by tracemalloc. The machine "
        "is shared: ratios measured in one run are more reliable than absolute times, and the "
        "minimum, which load from elsewhere can only raise, is shown beside the median (the "
        "targets are judged on the median).",
        "",
    ]
    rows = []
    for size in scaling["sizes"]:
        for name, op in size["ops"].items():
            rows.append(
                [
                    f"{size['messages']:,}",
                    f"{size['tokens']:,}",
                    name,
                    _num(op["median_us"]),
                    _num(op["p95_us"]),
                    _num(op["min_us"]),
                    f"{op['ratio_to_count']:.2f}x",
                    f"{op['ratio_to_count_min']:.2f}x",
                    f"{op['peak_kib']:,.0f}",
                    str(op["repeats"]),
                ]
            )
    lines = intro + _table(
        [
            "messages",
            "tokens (estimate)",
            "operation",
            "median µs",
            "p95 µs",
            "min µs",
            "vs count_tokens_approximately (median)",
            "(min)",
            "peak KiB (tracemalloc)",
            "repeats",
        ],
        rows,
    )
    growth = scaling["growth_1k_to_10k"]
    growth_min = scaling.get("growth_1k_to_10k_min", {})
    if growth:
        lines += [
            "",
            "Growth from 1,000 to 10,000 messages, median time (min time): "
            + ", ".join(
                f"{name} {g:.2f}x ({growth_min.get(name) or 0:.2f}x)"
                for name, g in growth.items()
                if g is not None
            )
            + ".",
        ]
    checks = []
    for size in scaling["sizes"]:
        checks.append(
            f"{size['messages']:,}: no-op returned the same list: "
            f"{'yes' if size['noop_returns_same_list'] else 'NO'}, prune path stages: "
            f"{'+'.join(size['prune_path_stages'])}"
        )
    lines += ["", "Checks: " + "; ".join(checks) + "."]
    return [*lines, ""]


def render(out: dict[str, Any]) -> str:
    """Return the whole report."""
    meta = out["meta"]
    m = meta["machine"]
    config = out["config"]
    strategies = config["strategies"]
    git = m["git"]
    commit = git.get("commit") or "unknown"
    if git.get("dirty"):
        commit += " (with uncommitted changes)"
    lines = [
        "# Benchmarks: the pipeline and its peers on real agent transcripts",
        "",
        "Generated by `benchmarks/` (do not edit by hand: run the command below again).",
        "",
        f"- Date: {meta['date']}",
        f"- Command: `{meta['command']}`" + (" (quick mode)" if meta["quick"] else ""),
        f"- Wall time: {meta['wall_s'].get('total', 0):.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in meta["wall_s"].items() if k != "total")
        + ")",
        f"- Machine: {m['nproc']} cores, {m['cpu']}, {m['memory_gib']} GiB, "
        f"Python {m['python']}, {m['platform']}",
        "- Packages: "
        + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v is not None)
        + f"; project commit {commit}",
        "",
        "## How it is measured",
        "",
        f"- Transcripts: {len(config['transcripts'])} real agent runs "
        f"({sum(t['requests'] for t in config['transcripts'])} requests) from "
        "`benchmarks/transcripts/` (licences and provenance in its `MANIFEST.md`). "
        "Each is replayed turn by turn: before each assistant message, the history so far is "
        "the request (plus the whole history when a transcript does not end with the model's "
        "answer). Messages get stable ids `m0`, `m1`... as a checkpointer would give them.",
        "- Windows: " + ", ".join(f"{w:,}" for w in config["windows"]) + " tokens; the tail "
        "(ours) and `keep` (SummarizationMiddleware) are a quarter of the window.",
        "- One token counter for every figure: the project's `estimate_tokens` "
        "(content-aware: never below cl100k, o200k, Llama 3, Qwen 3 or DeepSeek on the "
        "token corpus; 4 tokens per message, images 1600). "
        "Peers keep their own default counter for their own decisions "
        "(`count_tokens_approximately`), as their users would, except `trim_messages`, "
        "which needs one and gets ours.",
        f"- One fake summarizer (a `BaseChatModel`) serves every strategy: its reply is the "
        f"first min({config['fake_summarizer']['share']:.0%} of its prompt's characters, "
        f"{config['fake_summarizer']['cap_chars']:,}) characters of its prompt. "
        "It records calls and tokens; its time is subtracted from the overhead.",
        "- Cost model (prices relative to one uncached input token, as e.g. GPT-4.1 or "
        "Claude Sonnet price them: cached reads 0.1x, output 4-5x): effective cost = uncached "
        "input + 0.1 x cached input + summarizer input + 4 x summarizer output; cache writes "
        "are free and every request may reuse the longest common prefix (message by message, "
        "as the provider sees them: role, content, tool calls) of the previous request. "
        "Shown as a share of no management on the same transcripts.",
        "- Overflows: requests above the window. Orphans: tool results not right after the "
        "assistant message that called them (with only tool results in between); unanswered: "
        "calls with no result there. Both are summed over every request sent.",
        "- Overflows in real tokens: the same requests counted again by real tokenizers "
        "(cl100k_base, o200k_base, Llama 3 and Qwen 3 in the full run; per message the "
        "tokenizer's count of what a provider sends plus 4 tokens of framing, plus 3 per "
        "request, as `test_real_token_budget.py` counts), on the transcripts and on "
        "conversations built from the token corpus, next to each strategy's own count.",
        "- Requests without the task: requests whose input lacks the first 80 characters of "
        "the first user message.",
        "- Retention, in the final request of each transcript: the share of tool-call "
        "arguments `path`, `file_path`, `command`, `cmd`, `query`, `pattern`, `url` (each cut "
        "to 60 chars) found anywhere in the model input (texts, tool-call arguments); the share "
        "of user messages whose first 80 characters are found; and whether the verdict of the "
        "latest test or build output is found: in the newest tool result (user observation, "
        "for text-parsed agents) that has one, its last line (cut to 80 chars) like "
        "`N passed/failed`, `OK`/`FAILED`, `Ran N tests`, `Traceback (most recent call last)`, "
        "`SomethingError...` at a line start, `error: ...` or `BUILD FAILED`. Summed over "
        "transcripts.",
        "- Overhead: wall time of each strategy's own step per request (its call; the graph's "
        "state bookkeeping is not timed), fake summarizer excluded.",
        "",
        "Strategies (window W, tail W/4):",
        "",
    ]
    for key, s in strategies.items():
        calls = "; ".join(f"{_k(w)}: {c}" for w, c in s["calls"].items())
        lines.append(f"- **{s['label']}** (`{key}`): {calls}")
    lines += ["", "## Summary", "", summary_markdown(out)]
    lines += ["## Overflows in real tokens", "", real_tokens_markdown(out)]
    lines += ["## Window fill and next-step retention", ""]
    lines += window_markdown(out)
    lines += ["## low_water: the cache against the window", ""]
    lines += low_water_markdown(out)
    lines += ["## Recoverable retention", "", recoverable_markdown(out)]
    lines += ["## Targets (issue 5)", ""]
    lines += _targets(out)
    lines += ["", "## Where the cost goes", ""]
    lines += _cost_parts(out)
    lines += ["## With tiktoken cl100k_base", ""]
    lines += _tiktoken(out)
    lines += ["## Scaling: synthetic histories", ""]
    lines += _scaling(out)
    lines += ["## Per transcript", ""]
    lines += _per_transcript(out)
    errors = [e for data in out["windows"].values() for e in data["errors"]]
    if errors:
        lines += ["## Errors raised by strategies", ""] + [f"- `{e}`" for e in errors] + [""]
    if NOTES.exists() and not meta["quick"]:
        lines += [
            "## Analysis",
            "",
            "_Written by hand from a run of this harness; check it against the figures above._",
            "",
            NOTES.read_text(encoding="utf-8").strip(),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"
