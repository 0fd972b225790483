"""Retention: what of the history the final request holds, or can read back.

Plain retention (the ``_in`` counts, :meth:`Recoverable.retention_dict`) asks what
is still in the final model input. Recoverable retention also counts what a reference in it
leads back to: a brief, cut, summary or removal note of ours names its originals
(``ref=ab12cd34``, ``ref=ab12cd34..ef567890``), which the agent reads back with
the ``recall`` tool; the references are resolved with
:mod:`langchain_context_pipeline.messages.references` against the full history, as the
tool resolves them against graph state. A strategy without references can only
recover what it put somewhere the request names (deepagents: its offloaded
conversation-history file and its large-result files); for every other peer
recoverable retention is plain retention.

Three kinds of items, each counted once per transcript at its final request:
the tool-call arguments and user messages
(:func:`~benchmarks.texts.arg_items`, :func:`~benchmarks.texts.user_items`),
and every tool result, whole (in the request when its full text is there). Plain
retention also looks for the verdict of the latest test or build output
(:func:`~benchmarks.texts.latest_result`) in the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from benchmarks.texts import arg_items, haystack, latest_result, user_items
from langchain_context_pipeline.messages.references import find_refs, resolve
from langchain_context_pipeline.tokens.counters import message_text

Evicts = Callable[[str, str], bool]
"""``evicts(tool_name, result_text)``: whether a strategy moved the result to a file."""


@dataclass
class Recoverable:
    """Per kind of item: how many are in the request, how many are recoverable, of how many.

    ``verdict_in`` / ``verdict_total``: whether the latest test or build verdict is
    in the request, of whether there is one (plain retention only).
    """

    args_in: int = 0
    args_kept: int = 0
    args_total: int = 0
    users_in: int = 0
    users_kept: int = 0
    users_total: int = 0
    results_in: int = 0
    results_kept: int = 0
    results_total: int = 0
    verdict_in: int = 0
    verdict_total: int = 0

    def add(self, other: Recoverable) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @staticmethod
    def share(kept: int, total: int) -> float | None:
        return None if total == 0 else kept / total

    @property
    def args(self) -> float | None:
        return self.share(self.args_kept, self.args_total)

    @property
    def users(self) -> float | None:
        return self.share(self.users_kept, self.users_total)

    @property
    def results(self) -> float | None:
        return self.share(self.results_kept, self.results_total)

    @property
    def results_in_request(self) -> float | None:
        """Tool results whose full text is in the request (plain retention of results)."""
        return self.share(self.results_in, self.results_total)

    @property
    def overall(self) -> float | None:
        """The share of all items (arguments, user messages, tool results) recoverable."""
        total = self.args_total + self.users_total + self.results_total
        return self.share(self.args_kept + self.users_kept + self.results_kept, total)

    @property
    def overall_in_request(self) -> float | None:
        """The share of all items in the request itself."""
        total = self.args_total + self.users_total + self.results_total
        return self.share(self.args_in + self.users_in + self.results_in, total)

    @property
    def verdict(self) -> float | None:
        """The share of transcripts whose latest verdict is in the request."""
        return self.share(self.verdict_in, self.verdict_total)

    @property
    def retention(self) -> float | None:
        """Plain retention: the mean of the in-request shares of arguments, users, verdict."""
        parts = [
            x
            for x in (
                self.share(self.args_in, self.args_total),
                self.share(self.users_in, self.users_total),
                self.verdict,
            )
            if x is not None
        ]
        return sum(parts) / len(parts) if parts else None

    def as_dict(self) -> dict[str, float | int | None]:
        """The JSON form of recoverable retention (the ``recoverable`` key)."""
        out: dict[str, float | int | None] = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if not name.startswith("verdict")
        }
        for name in ("args", "users", "results", "results_in_request", "overall"):
            out[name] = getattr(self, name)
        out["overall_in_request"] = self.overall_in_request
        return out

    def retention_dict(self) -> dict[str, float | int | None]:
        """The JSON form of plain retention (the ``retention`` key): what is in the request."""
        return {
            "args_kept": self.args_in,
            "args_total": self.args_total,
            "users_kept": self.users_in,
            "users_total": self.users_total,
            "result_kept": self.verdict_in,
            "result_total": self.verdict_total,
            "args": self.share(self.args_in, self.args_total),
            "users": self.share(self.users_in, self.users_total),
            "result": self.verdict,
            "overall": self.retention,
        }


def referenced(
    history: Sequence[BaseMessage], model_input: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The messages of ``history`` a reference written in ``model_input`` resolves to."""
    found: dict[int, BaseMessage] = {}
    for ref in find_refs(haystack(model_input)):
        for message in resolve(ref, history) or ():
            found[id(message)] = message
    return list(found.values())


def _tool_names(history: Sequence[BaseMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in history:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    names[str(call["id"])] = call["name"]
    return names


def recoverable(
    history: Sequence[BaseMessage],
    model_input: Sequence[BaseMessage],
    *,
    references: bool,
    offloaded: str = "",
    evicts: Evicts | None = None,
) -> Recoverable:
    """Measure what of ``history`` the final ``model_input`` holds or can read back.

    Args:
        history: the full history of the conversation.
        model_input: the final request.
        references: whether the strategy writes references (ours) to resolve.
        offloaded: text the strategy keeps outside the request, under a name the
            request gives (deepagents' offloaded history files).
        evicts: whether the strategy moved a tool result (by tool name and text)
            to a file whose path the request carries (deepagents' large results).
    """
    hay = haystack(model_input)
    reached = referenced(history, model_input) if references else []
    back = "\n\x00\n".join(part for part in (haystack(reached), offloaded) if part)
    reached_ids = {id(m) for m in reached}
    out = Recoverable()
    for items, kind in ((arg_items(history), "args"), (user_items(history), "users")):
        inside = [item for item in items if item in hay]
        kept = len(inside) + sum(1 for item in items if item not in hay and item in back)
        setattr(out, f"{kind}_in", len(inside))
        setattr(out, f"{kind}_kept", kept)
        setattr(out, f"{kind}_total", len(items))
    names = _tool_names(history) if evicts is not None else {}
    for message in history:
        if not isinstance(message, ToolMessage):
            continue
        text = message_text(message)
        out.results_total += 1
        if text in hay:
            out.results_in += 1
            out.results_kept += 1
        elif (
            id(message) in reached_ids
            or (offloaded and text.strip() and text in offloaded)
            or (evicts is not None and evicts(names.get(message.tool_call_id, ""), text))
        ):
            out.results_kept += 1
    verdict = latest_result(history)
    out.verdict_in = int(verdict is not None and verdict in hay)
    out.verdict_total = int(verdict is not None)
    return out
