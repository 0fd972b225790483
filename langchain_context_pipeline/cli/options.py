"""The pipeline options of the command line, and the one place that builds the pipeline.

The command line computes no defaults of its own: an option the user leaves out
is not passed, and :class:`~langchain_context_pipeline.ContextPipeline` chooses
it (e.g. ``tail_budget`` from the threshold). Output reads the values back from
the built pipeline.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_pipeline_options(parser)
    >>> pipeline = build_pipeline(parser.parse_args(["--threshold", "64000"]))
    >>> pipeline.threshold, pipeline.tail_budget
    (64000, 8000)
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from langchain_context_pipeline.digest import DIGEST
from langchain_context_pipeline.pipeline import ContextPipeline

__all__ = ["UsageError", "add_pipeline_options", "build_pipeline"]

# The options passed on to ContextPipeline under the same name, when given.
_PIPELINE_OPTIONS = ("threshold", "tail_budget", "head_count")


class UsageError(Exception):
    """A mistake in how the command was called (an option, an output path); exit code 2."""


def _whole_number(text: str, minimum: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """Parse an option's value as a whole number of at least 1.

    Raises:
        argparse.ArgumentTypeError: If it is not one.
    """
    return _whole_number(text, 1, "a positive whole number")


def count(text: str) -> int:
    """Parse an option's value as a whole number of at least 0.

    Raises:
        argparse.ArgumentTypeError: If it is not one.
    """
    return _whole_number(text, 0, "a whole number >= 0")


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    """Add the options that configure the pipeline and its summarizer.

    Args:
        parser: A command's parser.
    """
    parser.add_argument(
        "--threshold",
        type=positive_int,
        default=None,
        help="token budget (default: ContextPipeline's)",
    )
    parser.add_argument(
        "--tail-budget",
        type=count,
        default=None,
        help="tokens of newest messages kept (default: ContextPipeline's, from the threshold)",
    )
    parser.add_argument(
        "--head-count",
        type=count,
        default=None,
        help="first N messages kept (default: ContextPipeline's)",
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:NAME",
        help="summarize with this chat model (init_chat_model); default: the deterministic digest",
    )
    parser.add_argument(
        "--base-url", default=None, help="an OpenAI-compatible server for --model-name"
    )
    parser.add_argument("--model-name", default=None, help="the model name at --base-url")


def build_pipeline(args: argparse.Namespace) -> ContextPipeline:
    """Build the pipeline from the options the user gave; the library decides the rest.

    Args:
        args: Parsed options of a command that called :func:`add_pipeline_options`.

    Returns:
        The pipeline; report its settings from it (``pipeline.tail_budget``, ...).

    Raises:
        UsageError: If the options are inconsistent, or the summarizer cannot be made.
    """
    given: dict[str, Any] = {
        name: getattr(args, name) for name in _PIPELINE_OPTIONS if getattr(args, name) is not None
    }
    model = _summarizer(args)
    try:
        return ContextPipeline(**given, model=model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _summarizer(args: argparse.Namespace) -> Any:
    """The chat model named by --model or --base-url/--model-name, else ``"digest"``."""
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
    return DIGEST
