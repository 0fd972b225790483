"""One-line briefs that stand in for old, bulky tool results.

A brief says what a tool call did and how big its result was, built from the
arguments of the call the ToolMessage answers, then fills its line (up to the tool
output limit) with the names the result holds: paths, file and dotted names,
snake_case and CamelCase identifiers, each once, in the order they first appear, so
the agent still knows what it saw and can ask for it again::

    [read_file] src/app.py (45,210 chars) names: create_app AppConfig db.session ...
    [execute] "npm test" -> 32 lines output names: src/api.test.ts handleRequest ...
    [search] "token limit" (12,400 chars result) names: docs/limits.md max_tokens ...

Users add briefs for their own tools with ``briefs={"my_tool": fn}``, where ``fn``
takes the tool's name, its call's arguments and its output text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from langchain_context_pipeline.messages.trim import cut_json
from langchain_context_pipeline.messages.values import dumps
from langchain_context_pipeline.tokens.estimate import text_tokens
from langchain_context_pipeline.tokens.memo import Memo

__all__ = ["BUILTIN_BRIEFS", "BriefFunction", "brief_for", "shorten", "with_names"]

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


NAMES_SCAN = (2_000, 1_000)
"""Characters of a result searched for names: the first, then the last."""
NAMES_HELD = 2_000
"""Characters of names kept per result (no brief line holds more)."""
_NAMES_TAG = " names:"
_TAGS = re.compile(r"</[A-Za-z][\w:.-]*>|<[A-Za-z][\w:.-]*/>")
"""Closing and empty markup tags (``</returncode>``, ``<br/>``): no paths. (An opening
tag reads as a word, and ``Vec<MyType>`` keeps its type's name.)"""
_SEPARATORS = str.maketrans(dict.fromkeys("!\"#$%&'()*+,:;<=>?@[\\]^`{|}~", " "))
"""ASCII marks that end a name (a name keeps ``_``, ``.``, ``/`` and ``-``)."""


def _is_name(token: str) -> bool:
    """Whether ``token`` reads as a path, file or dotted name, snake_case or CamelCase."""
    if len(token) < 3 or token.lower() == token.upper():  # too short, or no letter
        return False
    if "/" in token or "_" in token:
        return True
    if "." in token:  # a file or dotted name: a letter after its last dot
        return token.rpartition(".")[2][:1].isalpha()
    # CamelCase or camelCase: an uppercase letter after a lowercase one.
    return token.isalnum() and not (token.islower() or token.isupper() or token.istitle())


def _names(output: str) -> tuple[str, ...]:
    """The names in ``output``'s scanned part, each once, in order (see :func:`_is_name`)."""
    head, tail = NAMES_SCAN
    text = output if len(output) <= head + tail else f"{output[:head]}\n{output[-tail:]}"
    text = _TAGS.sub(" ", text)
    tokens = dict.fromkeys(t.strip(".-") for t in text.translate(_SEPARATORS).split())
    names: list[str] = []
    held = 0
    for token in tokens:
        if _is_name(token):
            names.append(token)
            held += len(token) + 1
            if held > NAMES_HELD:
                break
    return tuple(names)


def _with_names(key: tuple[str, str, int]) -> str:
    line, output, limit = key
    # The names never make a brief cost more than what it stands for: the line with
    # them stays within ``limit`` characters and within the output's estimated
    # tokens in UTF-8 bytes (a token is a byte or more; the pass has counted the
    # output already, so that is a lookup).
    room = limit - len(line) - len(_NAMES_TAG)
    spare = text_tokens(output) - len(line.encode("utf-8", "surrogatepass")) - len(_NAMES_TAG)
    if min(room, spare) < 4:
        return line
    names: list[str] = []
    for name in _names(output):
        if name in line:
            continue
        size = len(name.encode("utf-8", "surrogatepass")) + 1
        if len(name) + 1 > room or size > spare:
            continue  # a shorter one may still fit
        names.append(name)
        room -= len(name) + 1
        spare -= size
        if min(room, spare) < 4:
            break
    return f"{line}{_NAMES_TAG} {' '.join(names)}" if names else line


def _key_size(key: tuple[str, str, int]) -> int:
    return sys.getsizeof(key[0]) + sys.getsizeof(key[1])


_named: Memo[tuple[str, str, int], str] = Memo(_with_names, 8 * 1024 * 1024, _key_size)
"""Each brief line with its names, by line, result text and limit: an agent re-sends
the same old results every turn (new objects, when a checkpointer reads them back),
so each is read once."""


def with_names(line: str, output: str, limit: int) -> str:
    """Return ``line`` followed by the names ``output`` holds, within ``limit`` chars.

    The names are paths, file and dotted names, snake_case and CamelCase
    identifiers of three characters or more, not already in ``line``, each once,
    in the order they first appear in the first and last characters of ``output``
    (:data:`NAMES_SCAN`), closing tags left out; as many as fit in ``limit``
    characters, and in as many UTF-8 bytes as ``output`` has estimated tokens (so the
    names never make the line cost more than the output). ``line`` itself when none
    fits.
    """
    return _named[(line, output, limit)]


def brief_for(
    name: str,
    args: Mapping[str, Any],
    output: str,
    *,
    registry: Mapping[str, BriefFunction] | None = None,
    limit: int = 500,
    names: bool = False,
) -> str:
    """Return the one-line brief of a tool result, at most ``limit`` chars.

    The user's ``registry`` wins over the built-ins; an unknown tool gets the
    generic ``[name] key=value (N chars)`` brief. A brief builder that raises or
    returns something other than text falls back to the generic brief. A built-in or
    generic brief then takes the names the output holds (:func:`with_names`) up to
    ``limit`` when ``names`` is True (the Pruner's ``brief_names``); a brief of the
    user's is left as it is.
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
    brief = shorten(line, limit)
    if not names or (builder is not None and builder is (registry or {}).get(name)):
        return brief  # the user's own brief is theirs: no names added
    return with_names(brief, output, limit)
