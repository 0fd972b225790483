"""The ``context-pipeline`` command line: try the pipeline on saved transcripts.

Commands:

- ``compress FILE``: write the compressed transcript (same format), report to stderr;
- ``report FILE...``: a table of what each stage saved, per file and in total;
- ``replay FILE``: tokens sent per turn with and without the pipeline.

A user mistake (a missing file, bad JSON, a bad option) prints one line and exits
with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from langchain_context_pipeline.cli.transcripts import (
    TranscriptError,
    dump_transcript,
    load_transcript,
)
from langchain_context_pipeline.pipeline import CompressionReport, ContextPipeline
from langchain_context_pipeline.replay import replay

__all__ = ["main"]

PROG = "context-pipeline"


class UsageError(Exception):
    """A mistake in how the command was called; exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=_positive_int, default=32000, help="token budget")
    parser.add_argument(
        "--tail-budget",
        type=_count,
        default=None,
        help="tokens of newest messages kept (default: threshold/4)",
    )
    parser.add_argument("--head-count", type=_count, default=2, help="first N messages kept")
    parser.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:NAME",
        help="summarise with this chat model (init_chat_model); default: the deterministic digest",
    )
    parser.add_argument(
        "--base-url", default=None, help="an OpenAI-compatible server for --model-name"
    )
    parser.add_argument("--model-name", default=None, help="the model name at --base-url")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Keep agent transcripts under a token budget.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    compress = commands.add_parser("compress", help="compress one transcript")
    compress.add_argument("file", help="transcript: OpenAI JSON/JSONL or LangChain message dumps")
    compress.add_argument("-o", "--output", default=None, help="write here instead of stdout")
    _add_pipeline_options(compress)

    report = commands.add_parser("report", help="what each stage saves, per file")
    report.add_argument("files", nargs="+", help="transcripts")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_pipeline_options(report)

    replay_cmd = commands.add_parser("replay", help="tokens per turn with and without the pipeline")
    replay_cmd.add_argument("file", help="transcript")
    replay_cmd.add_argument(
        "--plot", default=None, metavar="OUT.png", help="save a plot (needs matplotlib)"
    )
    _add_pipeline_options(replay_cmd)
    return parser


def _summariser(args: argparse.Namespace) -> Any:
    if args.base_url or args.model_name:
        if not (args.base_url and args.model_name):
            raise UsageError("--base-url and --model-name go together")
        if args.model:
            raise UsageError("use either --model or --base-url with --model-name, not both")
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            raise UsageError(
                "--base-url needs langchain-openai: "
                "pip install 'langchain-context-pipeline[openai]'"
            ) from None
        import os

        return ChatOpenAI(
            base_url=args.base_url,
            model=args.model_name,
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),  # type: ignore[arg-type]
        )
    if args.model:
        if ":" not in args.model:
            raise UsageError(
                f"--model: expected PROVIDER:NAME (e.g. openai:gpt-4o-mini), got {args.model!r}"
            )
        try:
            from langchain.chat_models import init_chat_model
        except ImportError:
            raise UsageError(
                "--model needs langchain: pip install 'langchain-context-pipeline[agents]'"
            ) from None
        try:
            return init_chat_model(args.model)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"--model {args.model}: {' '.join(str(exc).split())}") from None
    return "digest"


def _pipeline(args: argparse.Namespace) -> ContextPipeline:
    tail = args.tail_budget if args.tail_budget is not None else args.threshold // 4
    try:
        return ContextPipeline(
            threshold=args.threshold,
            tail_budget=tail,
            head_count=args.head_count,
            model=_summariser(args),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _report_line(name: str, report: CompressionReport, seconds: float) -> str:
    return (
        f"{name}: {report.tokens_before:,} -> {report.tokens_after:,} tokens "
        f"(threshold {report.threshold:,}; stages: {', '.join(report.stages) or 'none'}; "
        f"briefed {report.briefed}, args trimmed {report.args_trimmed}, "
        f"texts cut {report.texts_trimmed}, "
        f"condensed {report.condensed}, dropped {report.dropped}; "
        f"summariser calls {report.summariser_calls}, failures {report.summariser_failures}; "
        f"{seconds * 1000:.0f} ms)"
    )


def _cmd_compress(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    pipeline = _pipeline(args)
    messages, fmt = load_transcript(args.file)
    started = time.perf_counter()
    result = pipeline.compress(messages)
    elapsed = time.perf_counter() - started
    text = dump_transcript(result.messages, fmt)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        out.write(text if text.endswith("\n") else text + "\n")
    print(_report_line(args.file, result.report, elapsed), file=err)
    return 0


_COLUMNS = (
    ("file", "file"),
    ("msgs", "messages"),
    ("before", "tokens_before"),
    ("pruned", "after_prune"),
    ("condensed", "after_condense"),
    ("truncated", "after_truncate"),
    ("briefs", "briefed"),
    ("args", "args_trimmed"),
    ("texts", "texts_trimmed"),
    ("cond.", "condensed"),
    ("dropped", "dropped"),
    ("ms", "ms"),
)


def _row(name: str, count: int, report: CompressionReport, seconds: float) -> dict[str, Any]:
    after_prune = report.tokens_after_prune or report.tokens_before
    after_condense = report.tokens_after_condense or after_prune
    return {
        "file": name,
        "messages": count,
        "tokens_before": report.tokens_before,
        "after_prune": after_prune,
        "after_condense": after_condense,
        "after_truncate": report.tokens_after_truncate or after_condense,
        "tokens_after": report.tokens_after,
        "briefed": report.briefed,
        "args_trimmed": report.args_trimmed,
        "texts_trimmed": report.texts_trimmed,
        "condensed": report.condensed,
        "dropped": report.dropped,
        "summariser_calls": report.summariser_calls,
        "summariser_failures": report.summariser_failures,
        "stages": list(report.stages),
        "ms": round(seconds * 1000, 1),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    cells = [[h for h, _ in _COLUMNS]]
    for row in rows:
        cells.append(
            [f"{row[k]:,}" if isinstance(row[k], int) else str(row[k]) for _, k in _COLUMNS]
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(_COLUMNS))]
    lines = []
    for n, r in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _progress(done: int, total: int, name: str, err: TextIO) -> None:
    width = 24
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    end = "\n" if done == total else "\r"
    err.write(f"[{bar}] {done}/{total} {Path(name).name[:40]:<40}{end}")
    err.flush()


def _cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    pipeline = _pipeline(args)
    loaded = [(name, load_transcript(name)[0]) for name in args.files]
    rows: list[dict[str, Any]] = []
    for done, (name, messages) in enumerate(loaded, start=1):
        started = time.perf_counter()
        result = pipeline.compress(messages)
        rows.append(
            _row(Path(name).name, len(messages), result.report, time.perf_counter() - started)
        )
        _progress(done, len(loaded), name, err)
    total: dict[str, Any] = {"file": "TOTAL", "stages": []}
    for key in rows[0]:
        if key not in total:
            total[key] = (
                round(sum(r[key] for r in rows), 1) if key == "ms" else sum(r[key] for r in rows)
            )
    if args.json:
        json.dump({"threshold": pipeline.threshold, "files": rows, "total": total}, out, indent=2)
        out.write("\n")
        return 0
    print(
        f"threshold {pipeline.threshold:,} tokens, tail {pipeline.tail_budget:,}, "
        f"condense: {'digest' if pipeline.model is None else type(pipeline.model).__name__}",
        file=out,
    )
    print(_table([*rows, total]), file=out)
    saved = total["tokens_before"] - total["tokens_after"]
    share = saved / total["tokens_before"] if total["tokens_before"] else 0.0
    print(f"saved {saved:,} of {total['tokens_before']:,} tokens ({share:.0%})", file=out)
    return 0


def _cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.plot:
        try:
            import matplotlib
        except ImportError:
            raise UsageError(
                "--plot needs matplotlib: pip install 'langchain-context-pipeline[plot]'"
            ) from None
    pipeline = _pipeline(args)
    messages, _ = load_transcript(args.file)
    result = replay(messages, pipeline)
    print(f"{'turn':>5}  {'without':>9}  {'with':>9}  stages", file=out)
    for turn in result.turns:
        print(
            f"{turn.index:>5}  {turn.tokens_without:>9,}  {turn.tokens_with:>9,}  "
            f"{','.join(turn.stages) or '-'}",
            file=out,
        )
    print(
        f"total: {result.tokens_without:,} tokens without, "
        f"{result.tokens_with:,} with the pipeline "
        f"over {len(result.turns)} model calls; summariser calls {result.summariser_calls}",
        file=out,
    )
    if args.plot:
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(8, 4))
        xs = [t.index for t in result.turns]
        axes.plot(xs, [t.tokens_without for t in result.turns], label="without")
        axes.plot(xs, [t.tokens_with for t in result.turns], label="with the pipeline")
        axes.axhline(pipeline.threshold, linestyle="--", color="grey", label="threshold")
        axes.set_xlabel("message index of the model call")
        axes.set_ylabel("tokens sent")
        axes.set_title(Path(args.file).name)
        axes.legend()
        figure.tight_layout()
        try:
            figure.savefig(args.plot)
        except OSError as exc:
            raise UsageError(f"{args.plot}: cannot write: {exc.strerror or exc}") from None
        finally:
            plt.close(figure)
        print(f"plot written to {args.plot}", file=err)
    return 0


_COMMANDS = {"compress": _cmd_compress, "report": _cmd_report, "replay": _cmd_replay}


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line; return the exit code (2 for a user mistake)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
        return _COMMANDS[args.command](args, out, err)
    except (UsageError, TranscriptError) as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
