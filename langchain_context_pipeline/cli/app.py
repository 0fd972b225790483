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
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from langchain_context_pipeline.cli.commands import COMMANDS
from langchain_context_pipeline.cli.options import UsageError, add_pipeline_options
from langchain_context_pipeline.cli.transcript_errors import TranscriptError

__all__ = ["PROG", "main"]

PROG = "context-pipeline"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Keep agent transcripts under a token budget.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    compress = commands.add_parser("compress", help="compress one transcript")
    compress.add_argument("file", help="transcript: OpenAI JSON/JSONL or LangChain message dumps")
    compress.add_argument("-o", "--output", default=None, help="write here instead of stdout")
    add_pipeline_options(compress)

    report = commands.add_parser("report", help="what each stage saves, per file")
    report.add_argument("files", nargs="+", help="transcripts")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_pipeline_options(report)

    replay = commands.add_parser("replay", help="tokens per turn with and without the pipeline")
    replay.add_argument("file", help="transcript")
    replay.add_argument(
        "--plot", default=None, metavar="OUT.png", help="save a plot (needs matplotlib)"
    )
    add_pipeline_options(replay)
    return parser


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when ``None``.
        stdout: Where results go; ``sys.stdout`` when ``None``.
        stderr: Where progress, reports and errors go; ``sys.stderr`` when ``None``.

    Returns:
        The exit code: 0, 2 for a user mistake, 130 when interrupted.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args, out, err)
    except (UsageError, TranscriptError) as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return 130
