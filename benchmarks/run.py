"""Command line: ``python -m benchmarks.run [--quick] [--out FILE] [--json FILE]``.

The full run replays all transcripts at 32k and 16k, and the token corpus's
conversations at 8k, 4k and 2k, counting every request by cl100k_base, o200k_base,
Llama 3 and Qwen 3 too, and writes ``BENCHMARKS.md`` and
``benchmarks/results.json``; ``--quick`` replays a few transcripts at 16k and a
few corpus conversations at 4k, counts real tokens with cl100k_base alone, with
fewer timing repeats, and writes under ``benchmarks/out/`` unless told.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.collect import ROOT, collect
from benchmarks.real_tokens import TOKENIZERS
from benchmarks.report import (
    real_tokens_markdown,
    recoverable_markdown,
    render,
    summary_markdown,
)
from benchmarks.targets import TARGET_STRATEGIES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Replay real transcripts through the pipeline and its peers.",
    )
    parser.add_argument("--quick", action="store_true", help="a few transcripts, one window")
    parser.add_argument("--out", type=Path, help="the Markdown report to write")
    parser.add_argument("--json", type=Path, help="the JSON results to write")
    parser.add_argument(
        "--transcripts", type=Path, help="folder of *.json transcripts (default: bundled)"
    )
    parser.add_argument(
        "--no-tiktoken", action="store_true", help="skip the tiktoken cl100k_base column"
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling runs")
    parser.add_argument(
        "--tokenizers",
        help="comma-separated quicktok encodings to count real tokens with, or 'none' "
        f"(default: {','.join(TOKENIZERS)}; cl100k_base with --quick)",
    )
    parser.add_argument(
        "--no-corpus", action="store_true", help="skip the token-corpus conversations"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if ours overflows, orphans a tool result or raises",
    )
    return parser


def invariant_failures(out: dict[str, Any]) -> list[str]:
    """Return what our budgeted strategies got wrong: overflows, broken pairs, errors.

    Overflows by real tokenizers count too, for every budgeted strategy of ours, on
    the transcripts and on the token corpus's conversations; a usage-reporting or
    exact-counter run by its provider's tokenizer.
    """
    failures = []
    for window, data in out["windows"].items():
        for key in TARGET_STRATEGIES:
            t = data["totals"][key]
            for field in ("overflows", "orphans", "unanswered", "errors"):
                if t[field]:
                    failures.append(f"{key} at {window}: {field} = {t[field]}")
    config = out["config"]["strategies"]
    ours = [k for k, s in config.items() if s["ours"] and s["budgeted"]]
    sets = [("", out["windows"]), ("corpus ", out.get("corpus", {}).get("windows", {}))]
    for where, windows in sets:
        for window, data in windows.items():
            for key in ours:
                real = data["totals"][key].get("real_tokens") or {}
                held_to = config[key].get("reports_in")  # usage or exact count: its provider's
                for name, n in real.get("overflows", {}).items():
                    if n and held_to in (None, name):
                        failures.append(f"{key} at {where}{window}: {name} overflows = {n}")
    return failures


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out_md = args.out or (
        ROOT / "benchmarks/out/quick.md" if args.quick else ROOT / "BENCHMARKS.md"
    )
    out_json = args.json or (
        ROOT / "benchmarks/out/quick.json" if args.quick else ROOT / "benchmarks/results.json"
    )
    command = "python -m benchmarks.run" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv)
    )
    out = collect(
        quick=args.quick,
        transcripts_dir=args.transcripts,
        with_tiktoken=False if args.no_tiktoken else None,
        with_scaling=not args.no_scaling,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        command=command,
        real_tokenizers=None
        if args.tokenizers is None
        else [n.strip() for n in args.tokenizers.split(",") if n.strip() not in ("", "none")],
        with_corpus=not args.no_corpus,
    )
    for path, text in (
        (out_md, render(out)),
        (out_json, json.dumps(out, indent=1, ensure_ascii=False) + "\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(summary_markdown(out))
    print(real_tokens_markdown(out))
    print(recoverable_markdown(out))
    met = sum(1 for t in out["targets"] if t["met"])
    print(f"targets met: {met} of {len(out['targets'])}")
    print(f"wrote {out_md} and {out_json} in {out['meta']['wall_s']['total']:.0f} s")
    failures = invariant_failures(out)
    for failure in failures:
        print(f"INVARIANT: {failure}", file=sys.stderr)
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
