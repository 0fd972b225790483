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
