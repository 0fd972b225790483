"""The real transcripts: loading, stable ids, and the requests an agent would send."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

TRANSCRIPTS_DIR = Path(__file__).resolve().parent / "transcripts"
"""The bundled copy of the corpus (licence and provenance in its MANIFEST.md)."""

QUICK_TRANSCRIPTS = (
    "minisweagent_sqlfluff-1733_deepseek",
    "aider_afi-core_gpt4o",
    "langgraph_hierarchical_teams_research",
    "taubench_airline_task2_gpt4o",
)
"""A long native tool loop that needs condensing and truncation at 16k, a text-only
session (no tool calls), parallel tool calls, and a customer-service run."""

_NOT_TRANSCRIPTS = frozenset({"manifest"})


@dataclass
class Transcript:
    """One conversation as saved: OpenAI-style dicts."""

    name: str
    raw: list[dict[str, Any]] = field(repr=False)

    def messages(self) -> list[BaseMessage]:
        """Return fresh LangChain messages with stable ids ``m0``, ``m1``... (a checkpointer's).

        Each call builds new objects, so no strategy can see another's edits.
        """
        messages = convert_to_messages(self.raw)
        for index, message in enumerate(messages):
            message.id = f"m{index}"
        return messages

    @property
    def request_ends(self) -> list[int]:
        """Where each model request ends: before every assistant message, plus the end.

        The request ``messages[:end]`` is the history the agent sends before the
        model writes message ``end``; a transcript that does not end with the
        model's answer yields one more request, the whole history.
        """
        roles = [m.get("role") for m in self.raw]
        ends = [i for i, role in enumerate(roles) if role == "assistant" and i > 0]
        if roles and roles[-1] != "assistant":
            ends.append(len(roles))
        return ends


def load_transcripts(
    folder: Path | str | None = None, names: tuple[str, ...] | list[str] | None = None
) -> list[Transcript]:
    """Load every ``*.json`` transcript of ``folder`` (default: the bundled copy), sorted.

    Raises:
        FileNotFoundError: when the folder holds no transcript or a named one is missing.
    """
    root = Path(folder) if folder is not None else TRANSCRIPTS_DIR
    found: dict[str, Path] = {}
    for path in sorted(root.glob("*.json")):
        if path.stem.lower() in _NOT_TRANSCRIPTS:
            continue
        found[path.stem] = path
    if not found:
        raise FileNotFoundError(f"no *.json transcript in {root}")
    wanted = list(found) if names is None else list(names)
    missing = [n for n in wanted if n not in found]
    if missing:
        raise FileNotFoundError(f"transcripts not found in {root}: {', '.join(missing)}")
    out = []
    for name in wanted:
        raw = json.loads(found[name].read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise ValueError(f"{found[name]}: expected a JSON list of messages")
        out.append(Transcript(name=name, raw=raw))
    return out


CORPUS_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "token_corpus"
"""The token corpus: multilingual, CJK, code, JSON, logs, base64 (sources in its NOTICE.md)."""

CORPUS_WINDOWS = (8_000, 4_000, 2_000)
"""Windows for the corpus conversations: the largest is about 34k tokens by the estimate
(21k by cl100k), so at the transcripts' windows almost every request would fit; the
multilingual and CJK samples are at most about 3k real tokens, so only 2k puts some
of them over the window."""

QUICK_CORPUS = (
    "multilingual__ar_news",
    "cjk__zh_chat",
    "json__records_minified",
    "base64__random_bytes",
)
"""A few corpus conversations for the quick run: Arabic, Chinese, JSON, base64."""

CORPUS_CHUNK = 6000
"""Characters of the sample per tool result."""


def corpus_conversation(name: str, text: str) -> list[dict[str, Any]]:
    """Turn one corpus sample into an agent conversation, as OpenAI-style dicts.

    The same conversation ``tests/unit_tests/test_real_token_budget.py`` builds:
    a task, then per 6,000-character piece an assistant message (the piece's first
    300 characters) calling ``read_file`` and the piece as its result, then a user
    message with the sample's last 400 characters.
    """
    raw: list[dict[str, Any]] = [{"role": "user", "content": f"Work through {name}."}]
    for i, start in enumerate(range(0, len(text), CORPUS_CHUNK)):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"{name}/{i}"})},
        }
        raw.append(
            {"role": "assistant", "content": text[start : start + 300], "tool_calls": [call]}
        )
        raw.append(
            {"role": "tool", "content": text[start : start + CORPUS_CHUNK], "tool_call_id": f"c{i}"}
        )
    raw.append({"role": "user", "content": text[-400:]})
    return raw


def load_corpus(
    folder: Path | str | None = None, names: tuple[str, ...] | list[str] | None = None
) -> list[Transcript]:
    """Load every ``<kind>__<name>.txt`` sample of the token corpus as a conversation, sorted.

    Raises:
        FileNotFoundError: when the folder holds no sample or a named one is missing.
    """
    root = Path(folder) if folder is not None else CORPUS_DIR
    found = {p.stem: p for p in sorted(root.glob("*__*.txt"))}
    if not found:
        raise FileNotFoundError(f"no <kind>__<name>.txt sample in {root}")
    wanted = list(found) if names is None else list(names)
    missing = [n for n in wanted if n not in found]
    if missing:
        raise FileNotFoundError(f"corpus samples not found in {root}: {', '.join(missing)}")
    return [
        Transcript(name=n, raw=corpus_conversation(n, found[n].read_text(encoding="utf-8")))
        for n in wanted
    ]
