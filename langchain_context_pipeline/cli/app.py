"""The ``context-pipeline`` command line: try the pipeline on saved transcripts.

Commands:

- ``compress FILE``: write the compressed transcript (same format), report to stderr;
- ``report FILE...``: a table of what each stage saved, per file and in total;
- ``replay FILE``: tokens sent per turn with and without the pipeline.

``-`` as a file reads standard input; ``--json`` prints the report as JSON.

A user mistake (a missing file, bad JSON or text, a bad option, a threshold too
small for the transcript, a summarizer model that cannot be made) prints one line
and exits with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO, NoReturn, TextIO

from langchain_context_pipeline import __version__
from langchain_context_pipeline.cli.commands import COMMANDS, Streams
from langchain_context_pipeline.cli.options import UsageError, add_pipeline_options
from langchain_context_pipeline.cli.render import escape_controls
from langchain_context_pipeline.cli.transcript_errors import TranscriptError
from langchain_context_pipeline.errors import BudgetError

__all__ = ["PROG", "main"]

PROG = "context-pipeline"
# A shell's exit code for a process ended by SIGPIPE (128 + 13).
_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Keep agent transcripts under a token budget.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    compress = commands.add_parser("compress", help="compress one transcript")
    compress.add_argument(
        "file", help="transcript (OpenAI JSON/JSONL or LangChain message dumps); - for stdin"
    )
    compress.add_argument("-o", "--output", default=None, help="write here instead of stdout")
    compress.add_argument("--json", action="store_true", help="the report (stderr) as JSON")
    add_pipeline_options(compress)

    report = commands.add_parser("report", help="what each stage saves, per file")
    report.add_argument("files", nargs="+", help="transcripts; - for stdin")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_pipeline_options(report)

    replay = commands.add_parser("replay", help="tokens per turn with and without the pipeline")
    replay.add_argument("file", help="transcript; - for stdin")
    replay.add_argument(
        "--plot", default=None, metavar="OUT.png", help="save a plot (needs matplotlib)"
    )
    replay.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_pipeline_options(replay)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: BinaryIO | None = None,
) -> int:
    """Run the command line.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when ``None``.
        stdout: Where results go; ``sys.stdout`` when ``None``.
        stderr: Where progress, reports and errors go; ``sys.stderr`` when ``None``.
        stdin: What the file ``-`` reads; ``sys.stdin.buffer`` when ``None``.

    Returns:
        The exit code: 0, 2 for a user mistake or an output that cannot be
        written (a full disk), 130 when interrupted, 141 when
        the reader of stdout closed it early (``| head``). ``--help``
        and ``--version`` print to ``sys.stdout`` and return 0.
    """
    err = stderr or sys.stderr
    source = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
    streams = Streams(stdout or sys.stdout, err, source or io.BytesIO())
    try:
        args = _parser().parse_args(argv)
    except SystemExit as done:  # --help, --version
        return done.code if isinstance(done.code, int) else 0
    except UsageError as exc:
        return _mistake(exc, err)
    try:
        return COMMANDS[args.command](args, streams)
    except (UsageError, TranscriptError, BudgetError) as exc:
        return _mistake(exc, err)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return 130
    except BrokenPipeError:  # `| head`: the reader has all it wanted
        _detach(streams.out)
        return _BROKEN_PIPE
    except OSError as exc:  # files are read and -o/--plot written above: stdout failed
        _detach(streams.out)
        return _mistake(UsageError(f"cannot write the output: {exc.strerror or exc}"), err)


def _detach(out: TextIO) -> None:
    """Point a closed pipe's descriptor at devnull, so the exit's flush of stdout is silent."""
    if out is not sys.stdout:
        return
    try:
        fd = out.fileno()
    except (AttributeError, ValueError, OSError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _mistake(exc: Exception, err: TextIO) -> int:
    """Report a user mistake in one line; exit code 2."""
    print(f"{PROG}: error: {escape_controls(' '.join(str(exc).split()))}", file=err)
    return 2
