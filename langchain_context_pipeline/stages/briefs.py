"""One-line briefs that stand in for old, bulky tool results.

A brief says what a tool call did and how big its result was, built from the
arguments of the call the ToolMessage answers::

    [read_file] src/app.py (45,210 chars)
    [execute] "npm test" -> 32 lines output
    [search] "token limit" (12,400 chars result)

Users add briefs for their own tools with ``briefs={"my_tool": fn}``, where ``fn``
takes the tool's name, its call's arguments and its output text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langchain_context_pipeline.messages.trim import cut_json
from langchain_context_pipeline.messages.values import dumps

__all__ = ["BUILTIN_BRIEFS", "BriefFunction", "brief_for", "shorten"]

BriefFunction = Callable[[str, Mapping[str, Any], str], str]
"""A brief function: ``fn(tool_name, call_args, output_text) -> one line``."""

_COMMAND_KEYS = ("command", "cmd", "code", "script")
_PATH_KEYS = ("path", "file_path", "file", "filename")
_QUERY_KEYS = ("query", "pattern", "q", "search_term", "regex")
_URL_KEYS = ("url", "uri", "href")


def shorten(text: str, limit: int) -> str:
    """Collapse whitespace and cut ``text`` to at most ``limit`` chars with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    if limit <= 1:
        return flat[:limit]
    return flat[: limit - 1] + "…"


def _first(args: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def call_target(args: Mapping[str, Any]) -> str | None:
    """Return what a tool call acted on: its path, command, query or URL, if any."""
    return (
        _first(args, _PATH_KEYS)
        or _first(args, _COMMAND_KEYS)
        or _first(args, _QUERY_KEYS)
        or _first(args, _URL_KEYS)
    )


def _size(output: str) -> str:
    return f"{len(output):,} chars"


def _line_count(output: str) -> int:
    # As len(output.splitlines()) for "\n" endings, without building the list.
    if not output:
        return 0
    return output.count("\n") + (0 if output.endswith("\n") else 1)


_VERDICT = re.compile(
    r"\b\d+ (passed|failed|errors?|skipped)\b|\b(FAILED|PASSED|FAIL|OK)\b|Traceback|"
    r"^\s*\w*(Error|Exception)\b|\berror:|exit code|BUILD (SUCCESS|FAILED)|Ran \d+ tests?",
    re.IGNORECASE,
)
_VERDICT_WORDS = re.compile("pass|fail|error|traceback|exit code|exception|ok|ran ")
_BOILERPLATE = re.compile(r"^\s*(</?[\w:-]+>|[-=_*#`~]{3,}|\$|>+)\s*$")
_VERDICT_LINES = 12
"""How many of an output's last lines are searched for a verdict."""


def _last_line(output: str) -> str | None:
    """Return the line that best says how a command ended.

    The last line near the end that reads like a verdict (``3 passed``, ``FAILED``,
    ``Traceback``, ``exit code 1``, ``SomeError: ...``); else the last line that is
    not boilerplate such as a closing tag or a rule.
    """
    # Briefs are rebuilt for every old tool result at every turn: a cheap word test
    # picks the candidate lines, and only those meet the regular expression.
    lines = output[-_VERDICT_LINES * 200 :].rstrip().splitlines()[-_VERDICT_LINES:]
    for line in reversed(lines):
        if _VERDICT_WORDS.search(line.lower()) and _VERDICT.search(line):
            return shorten(line, 80)
    for line in reversed(lines):
        if line.strip() and not _BOILERPLATE.match(line):
            return shorten(line, 80)
    return None


def brief_execute(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief a shell command: the command, the output's line count and its last line."""
    command = _first(args, _COMMAND_KEYS)
    lines = _line_count(output)
    shown = f'"{shorten(command, 120)}"' if command else "(command)"
    brief = f"[{name}] {shown} -> {lines} lines output"
    last = _last_line(output)
    return f"{brief}; last: {last}" if last else brief


def brief_read(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief a file read: the path and the size read."""
    path = _first(args, _PATH_KEYS) or _first(args, _URL_KEYS) or "?"
    return f"[{name}] {shorten(path, 160)} ({_size(output)})"


def brief_write(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief a file write or edit: the sub-command if any, the path, the result size."""
    path = _first(args, _PATH_KEYS) or "?"
    sub = args.get("command")
    verb = f"{sub} " if isinstance(sub, str) and len(sub) <= 20 and sub.isidentifier() else ""
    return f"[{name}] {verb}{shorten(path, 160)} ({_size(output)} result)"


def brief_search(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief a search: the query, where it searched, the result size."""
    query = _first(args, _QUERY_KEYS)
    where = _first(args, _PATH_KEYS)
    shown = f'"{shorten(query, 120)}"' if query else "(query)"
    place = f" in {shorten(where, 80)}" if where else ""
    return f"[{name}] {shown}{place} ({_size(output)} result)"


def brief_browser(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief a browser action: the page or element it acted on, the result size."""
    target = _first(args, _URL_KEYS) or _first(args, ("selector", "element", "text", "index"))
    if target is None:
        return brief_generic(name, args, output)
    return f"[{name}] {shorten(target, 160)} ({_size(output)})"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return shorten(value, 40)
    # Only 40 chars are shown: a cut copy renders any size and depth without recursion errors.
    value = cut_json(value, 40)
    return shorten(dumps(value, sort_keys=True), 40)


def brief_generic(name: str, args: Mapping[str, Any], output: str) -> str:
    """Brief any tool: its name, up to three ``key=value`` arguments, the result size."""
    shown = " ".join(f"{k}={_scalar(v)}" for k, v in list(args.items())[:3])
    middle = f" {shown}" if shown else ""
    return f"[{name}]{middle} ({_size(output)})"


BUILTIN_BRIEFS: Mapping[str, BriefFunction] = {
    **dict.fromkeys(
        ("execute", "bash", "shell", "execute_bash", "run", "run_command", "terminal", "python"),
        brief_execute,
    ),
    **dict.fromkeys(("read_file", "view", "open", "cat", "read", "view_file"), brief_read),
    **dict.fromkeys(
        ("write_file", "create", "edit", "str_replace_editor", "edit_file", "str_replace", "patch"),
        brief_write,
    ),
    **dict.fromkeys(
        ("search", "grep", "find", "find_file", "search_file", "search_dir", "web_search", "glob"),
        brief_search,
    ),
}
"""The built-in briefs by tool name; ``browser_*`` tools use :func:`brief_browser`."""

_BROWSER = re.compile(r"^browser[_.-]")


def brief_for(
    name: str,
    args: Mapping[str, Any],
    output: str,
    *,
    registry: Mapping[str, BriefFunction] | None = None,
    limit: int = 500,
) -> str:
    """Return the one-line brief of a tool result, at most ``limit`` chars.

    The user's ``registry`` wins over the built-ins; an unknown tool gets the
    generic ``[name] key=value (N chars)`` brief. A brief builder that raises or
    returns something other than text falls back to the generic brief.
    """
    builder: BriefFunction | None = (registry or {}).get(name) or BUILTIN_BRIEFS.get(name)
    if builder is None and _BROWSER.match(name):
        builder = brief_browser
    line: Any = None
    if builder is not None:
        try:
            line = builder(name, args, output)
        except Exception:  # a user's brief must not break the pipeline
            line = None
    if not isinstance(line, str) or not line.strip():
        line = brief_generic(name, args, output)
    return shorten(line, limit)
