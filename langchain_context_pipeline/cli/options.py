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
from collections.abc import Callable
from typing import Any

from langchain_context_pipeline.cli.transcript_errors import describe
from langchain_context_pipeline.core.pipeline import ContextPipeline
from langchain_context_pipeline.stages.digest import DIGEST
from langchain_context_pipeline.stages.settings import DEFAULT_TAIL_CAP, PipelineSettings

__all__ = ["UsageError", "add_pipeline_options", "build_pipeline"]

# The options passed on to ContextPipeline under the same name, when given.
_PIPELINE_OPTIONS = ("threshold", "tail_budget", "head_count")
# The library's defaults, read (not chosen) for --help.
_DEFAULTS = PipelineSettings()
# Where a chat model's construction fails on the user's setup rather than on a bug:
# a missing package, an unknown provider, a bad option. The provider's own client
# also raises its own classes (openai.OpenAIError without a key): see _is_setup_error.
_SETUP_ERRORS = (ImportError, ValueError, TypeError)
_OPENAI_EXTRA = "langchain-context-pipeline[openai]"


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
        help=f"token budget (default: {_DEFAULTS.threshold:,})",
    )
    parser.add_argument(
        "--tail-budget",
        type=count,
        default=None,
        help=f"tokens of newest messages kept (default: min({DEFAULT_TAIL_CAP:,}, threshold / 4))",
    )
    parser.add_argument(
        "--head-count",
        type=count,
        default=None,
        help=f"first N messages kept (default: {_DEFAULTS.head_count})",
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
                f"--base-url needs langchain-openai: pip install '{_OPENAI_EXTRA}'"
            ) from None
        api_key: Any = os.environ.get("OPENAI_API_KEY", "not-needed")

        def make() -> Any:
            return ChatOpenAI(base_url=args.base_url, model=args.model_name, api_key=api_key)

        return _construct("--base-url", make)
    if args.model:
        provider, colon, name = args.model.partition(":")
        if not (colon and provider and name):
            raise UsageError(
                f"--model: expected PROVIDER:NAME (e.g. openai:gpt-4o-mini), got {args.model!r}"
            )
        try:
            from langchain.chat_models import init_chat_model
        except ImportError:
            where = (
                f"'{_OPENAI_EXTRA}'"
                if provider == "openai"
                else "langchain and the provider's package (e.g. langchain-anthropic)"
            )
            raise UsageError(f"--model needs the langchain package: pip install {where}") from None
        return _construct(f"--model {args.model}", lambda: init_chat_model(args.model))
    return DIGEST


def _construct(option: str, make: Callable[[], Any]) -> Any:
    """Make the chat model; a failure of the user's setup is a one-line :class:`UsageError`.

    Raises:
        UsageError: If the model cannot be made: a missing package or key, an
            unknown provider, a bad option.
    """
    try:
        return make()
    except Exception as exc:
        if not _is_setup_error(exc):
            raise  # a bug, not a setting: keep its traceback
        raise UsageError(f"{option}: cannot make the model: {describe(exc)}") from None


def _is_setup_error(exc: Exception) -> bool:
    """Whether a model's constructor refused the user's setup.

    That is one of :data:`_SETUP_ERRORS`, or an exception class of the provider's
    own package (``openai.OpenAIError`` for a missing key, a cloud SDK's missing
    credentials). Other built-in errors (``AttributeError``, ``KeyError``, ...)
    are bugs and keep their traceback.
    """
    if isinstance(exc, _SETUP_ERRORS):
        return True
    package = type(exc).__module__.partition(".")[0]
    return package not in ("builtins", "langchain_context_pipeline")
