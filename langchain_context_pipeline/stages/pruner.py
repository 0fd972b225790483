"""The Pruner: free, mechanical shortening of old, bulky content.

Outside the protected tail (the newest messages within ``tail_budget`` tokens):

- a tool result longer than ``tool_output_limit`` chars becomes a one-line brief
  built from the arguments of the call it answers: a ``ToolMessage``'s (or legacy
  ``FunctionMessage``'s) content, or
  the result inside a ``tool_result`` (Anthropic) or ``function_call_output``
  (Responses) block of a user message, whose block keeps its type, its call id and
  its other keys;
- each string inside a tool call's arguments is cut to ``tool_args_limit`` chars;
- an assistant text longer than ``assistant_text_limit`` keeps its first
  ``assistant_keep_head`` and last ``assistant_keep_tail`` chars, also when the
  same message calls tools.

System messages are never touched, nor is anything else of a human message, and
the caller's messages are never mutated: changed messages are copies that keep
their ids and metadata.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from langchain_context_pipeline.errors import check_int
from langchain_context_pipeline.messages.anatomy import (
    RESULT_MESSAGES,
    Anatomy,
    keeps_form,
    one_pass,
    peek,
    read,
    result_message_id,
)
from langchain_context_pipeline.messages.blocks import (
    RESULT_BLOCKS,
    RESULT_CONTENT,
    block_type,
    pair_results,
    paired_call,
    result_ids,
    result_parts,
)
from langchain_context_pipeline.messages.kinds import IMAGE_BLOCKS
from langchain_context_pipeline.messages.marks import METADATA_KEY
from langchain_context_pipeline.messages.references import format_ref, message_ref
from langchain_context_pipeline.messages.snapshot import (
    Transient,
    forgetter,
    message_state,
    message_unchanged,
)
from langchain_context_pipeline.messages.trim import (
    cut_middle,
    replace_text,
    result_content,
    with_cut_args,
)
from langchain_context_pipeline.messages.units import Split
from langchain_context_pipeline.messages.values import dumps
from langchain_context_pipeline.stages.briefs import brief_for
from langchain_context_pipeline.stages.runnable import MessagesRunnable
from langchain_context_pipeline.stages.settings import PruneSettings, override
from langchain_context_pipeline.stages.stats import PruneStats
from langchain_context_pipeline.tokens.counters import IMAGE_TOKENS, count_images, message_text
from langchain_context_pipeline.tokens.meter import Meter

__all__ = ["PruneStats", "Pruner", "sum_stats"]

_MEMO_SIZE = 50_000
"""Pruned messages remembered across calls (the memo is emptied when full)."""


@dataclass(frozen=True)
class _Pruned:
    """One remembered pruning: what went in and what came out.

    The message itself is held weakly, so the memo keeps no conversation alive;
    its entry goes when the message does. The message is checked by its anatomy
    when the pass had read it (the anatomy memo checks every field: while
    :func:`~langchain_context_pipeline.messages.anatomy.read` gives the same object
    back, the message is as it was), else by ``state``. ``call`` is the call it
    answers as the pass's index of the calling message gave it (see
    :func:`~langchain_context_pipeline.messages.anatomy.call_index`): the same
    ``(name, args)`` object comes back only while that message's anatomy does, so
    an identical entry is the same call, unchanged, at no cost. An edit in place misses.
    """

    source: weakref.KeyedRef[int, BaseMessage]
    anatomy: Anatomy | None
    """The message's anatomy, when the pass had read the message (then no ``state``)."""
    state: Any
    call: Any
    result: BaseMessage | None
    """The pruned copy, or None when pruning left the message as it was."""
    result_state: Any
    """The pruned copy's state: a copy edited after it was handed out misses."""
    stats: PruneStats | None
    """What pruning changed; None for nothing (no object kept per unchanged message)."""

    def matches(self, message: BaseMessage, call: Any) -> bool:
        """Whether this result is for ``message`` as it is now, answering the same call."""
        if self.source() is not message:
            return False
        if self.anatomy is not None:
            if read(message) is not self.anatomy:
                return False
        elif not message_unchanged(message, self.state):
            return False
        if not _same_call(call, self.call):
            return False
        return self.result is None or message_unchanged(self.result, self.result_state)


_NOTHING = PruneStats()
"""What pruning a message it leaves as it was changed (compared with, never handed out)."""


def _same_call(now: Any, then: Any) -> bool:
    """Whether the calls a result answers are the very entries remembered (see ``_Pruned``)."""
    if isinstance(now, list):
        return (
            isinstance(then, list)
            and len(now) == len(then)
            and all(a is b for a, b in zip(now, then, strict=True))
        )
    return now is then


def sum_stats(each: Iterable[PruneStats | None]) -> PruneStats:
    """Return the stats of a pass from those of its messages (None: unchanged)."""
    stats = PruneStats()
    for own in each:
        if own is not None:
            stats.add(own)
    return stats


class Pruner(Transient, MessagesRunnable):
    """Shorten old tool output, tool-call arguments and long assistant texts.

    A Runnable over ``list[BaseMessage]`` (a ``PromptValue``, OpenAI-style dicts
    and tuples are accepted too).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "c1"}
        >>> history = [
        ...     HumanMessage("fix the bug"),
        ...     AIMessage("", tool_calls=[call]),
        ...     ToolMessage("x" * 45_210, tool_call_id="c1"),
        ...     HumanMessage("thanks"),
        ... ]
        >>> Pruner(tail_budget=10).invoke(history)[2].content
        '[read_file] src/app.py (45,210 chars) ref=9ef2c046'
    """

    name: str = "Pruner"

    def __init__(
        self,
        settings: PruneSettings | None = None,
        *,
        tail_budget: int = 8000,
        token_counter: Any = None,
        **keywords: Any,
    ) -> None:
        """Configure the Pruner.

        Args:
            settings: the sizes to prune to (default: :class:`PruneSettings`'s).
            tail_budget: tokens of newest messages kept verbatim when the Pruner
                runs on its own (the pipeline passes its split instead).
            token_counter: how to count tokens for ``tail_budget`` (default: estimate).
            **keywords: :class:`PruneSettings` fields, overriding ``settings``.

        Raises:
            ValueError: for a size that is not an int >= 0, or keep sizes that leave
                no room for the marker.
            TypeError: for an unknown keyword.
        """
        from langchain_context_pipeline.tokens.counters import resolve_token_counter

        check_int("tail_budget", tail_budget)
        self.settings: PruneSettings = override(settings or PruneSettings(), "Pruner", keywords)
        self.tail_budget = tail_budget
        self.token_counter = resolve_token_counter(token_counter)
        self._fresh()

    transient = ("_memo", "_forget")
    """A copy (or a pickle) keeps the settings and the counter and starts with an empty
    memo of its own: the memo is a cache of results, holding its messages weakly, so
    a copy that shared it, or held copies of it, would be neither independent nor
    smaller."""

    def _fresh(self) -> None:
        self._memo: dict[int, _Pruned] = {}
        self._forget = forgetter(self._memo)

    def _transform(self, messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        with one_pass():  # the split and the pruning read each message once
            meter = Meter(self.token_counter)
            where = Split.of(messages, 0).with_tail(messages, self.tail_budget, meter)
            return self.prune(messages, where)[0]

    def prune(
        self, messages: Sequence[BaseMessage], where: Split
    ) -> tuple[list[BaseMessage], PruneStats]:
        """Prune the middle of ``where``; the head before and the tail after stay verbatim.

        Returns a new list (unchanged messages are the caller's own objects) and
        what was changed.
        """
        out, each = self.prune_each(messages, where)
        return out, sum_stats(each)

    def prune_each(
        self, messages: Sequence[BaseMessage], where: Split
    ) -> tuple[list[BaseMessage], list[PruneStats | None]]:
        """Do :meth:`prune`, with what was changed message by message.

        A message's pruning depends on the message and the calls before it, never
        on where the tail starts: the pruning of ``messages`` with the tail at
        ``t <= where.tail_start`` is ``out[:t] + messages[t:]``, its stats
        ``sum_stats(each[:t])`` (the pipeline prices every prune boundary from one
        pass). ``each[i]`` is None for a message pruning could not change or left as
        it was; the stats of a message pruned at an earlier call are the ones
        remembered then (read them, do not change them).
        """
        with one_pass():
            return self._prune_each(messages, where)

    def _prune_each(
        self, messages: Sequence[BaseMessage], where: Split
    ) -> tuple[list[BaseMessage], list[PruneStats | None]]:
        start, stop = where.head_end, where.tail_start
        pairs = where.pairs_for(messages)
        indexes: dict[int, dict[str, tuple[str, Any]]] = {}
        systems = where.systems
        out = list(messages)
        each: list[PruneStats | None] = [None] * len(messages)
        for index in range(start, max(start, min(stop, len(messages)))):
            message = messages[index]
            if index in systems or not self._may_change(message):
                continue
            # Each result is briefed from the call pair_results pairs it with.
            calls: dict[str, tuple[str, Any]] = {}
            if not isinstance(message, AIMessage):
                pairs = pair_results(messages) if pairs is None else pairs
                calls = paired_call(messages, index, pairs, indexes)
            out[index], each[index] = self._prune_remembered(message, calls)
        return out, each

    def _may_change(self, message: BaseMessage) -> bool:
        """Whether pruning could change ``message``; False is certain, True is not.

        Only tool results (ToolMessages and legacy FunctionMessages, or result blocks
        in other messages' block content) and AI messages are pruned, and a
        ToolMessage or FunctionMessage only when longer than ``tool_output_limit``:
        a shorter one, or a message of string content that is
        neither, is left as it is without snapshotting it for the memo (which would
        cost more than this check). A result that must keep its form (a computer
        use screenshot, see :func:`~langchain_context_pipeline.messages.parse.keeps_form`)
        is never briefed.
        """
        if isinstance(message, RESULT_MESSAGES):
            if keeps_form(message):
                return False
            content = message.content
            if isinstance(content, str):  # message_text, with no image to count
                return len(content) > self.settings.tool_output_limit
            images = count_images(message)
            size = len(message_text(message)) + images * IMAGE_TOKENS * 4
            return size > self.settings.tool_output_limit
        return isinstance(message, AIMessage) or not isinstance(message.content, str)

    def _prune_remembered(
        self, message: BaseMessage, calls: Mapping[str, tuple[str, Any]]
    ) -> tuple[BaseMessage, PruneStats | None]:
        """Prune one message, reusing the result of an earlier call on the same message.

        An agent sends the same old messages at every turn; pruning them again would
        give the same bytes. A result is reused only for the very same message object
        whose fields, down to every string, and answered call are as they were (see
        :mod:`~langchain_context_pipeline.messages.snapshot`): an edit in place, an
        attribute set anew, or another call, misses, so the memo never returns what a
        fresh Pruner would not. The stats are None when pruning changed nothing.
        """
        call: Any = None
        if isinstance(message, RESULT_MESSAGES):
            call = calls.get(result_message_id(message))
        elif not isinstance(message, AIMessage) and not isinstance(message.content, str):
            call = [calls.get(cid) for cid in result_ids(message)]
        hit = self._memo.get(id(message))
        if hit is not None and hit.matches(message, call):
            return (message if hit.result is None else hit.result), hit.stats
        own = PruneStats()
        result = self._prune_one(message, calls, own)
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        key = id(message)
        kept = None if result is message else result
        stats = None if kept is None and own == _NOTHING else own
        anatomy = peek(message)
        self._memo[key] = _Pruned(
            weakref.KeyedRef(message, self._forget, key),
            anatomy,
            message_state(message) if anatomy is None else None,
            call,
            kept,
            None if kept is None else message_state(kept),
            stats,
        )
        return result, stats

    def _prune_one(
        self, message: BaseMessage, calls: Mapping[str, tuple[str, Any]], stats: PruneStats
    ) -> BaseMessage:
        if isinstance(message, RESULT_MESSAGES):
            return self._brief(message, calls, stats)
        if not isinstance(message, AIMessage):
            return self._brief_blocks(message, calls, stats)
        ref = message_ref(message)
        message, cut = with_cut_args(message, self.settings.tool_args_limit, ref)
        stats.args_shortened += cut
        text = message_text(message)
        if len(text) > self.settings.assistant_text_limit:
            keep = (self.settings.assistant_keep_head, self.settings.assistant_keep_tail)
            short = cut_middle(text, *keep, ref)
            if len(short) > self.settings.assistant_text_limit:  # no room to name it
                short = cut_middle(text, *keep)
            message = message.model_copy(update={"content": replace_text(message, short)})
            stats.texts_shortened += 1
        return message

    def _brief_line(
        self,
        name: str,
        args: Any,
        text: str,
        images: int,
        ref: str,
    ) -> str:
        """Return the brief of one tool result, ending with ``ref`` when the limit leaves room."""
        if not isinstance(args, Mapping):
            args = {"args": args}
        limit = self.settings.tool_output_limit
        named = f" {format_ref(ref)}"
        room = limit - len(named) if limit - len(named) >= 20 else limit
        line = brief_for(
            name,
            args,
            text,
            registry=self.settings.briefs,
            limit=room,
            names=self.settings.brief_names,
        )
        if images and len(line) + 12 <= room:
            line += f" +{images} image(s)"
        if room < limit:
            line += named
        return line

    def _brief(
        self, message: BaseMessage, calls: Mapping[str, tuple[str, Any]], stats: PruneStats
    ) -> BaseMessage:
        """Brief a ToolMessage or FunctionMessage over ``tool_output_limit``."""
        text = message_text(message)
        images = count_images(message)
        size = len(text) + images * IMAGE_TOKENS * 4
        if size <= self.settings.tool_output_limit:
            return message
        name, args = calls.get(result_message_id(message), (message.name or "tool", {}))
        # The brief ends with the original's reference, when the limit leaves room.
        line = self._brief_line(name, args, text, images, message_ref(message))
        meta = {**message.response_metadata, METADATA_KEY: {"kind": "brief"}}
        stats.briefed += 1
        content = result_content(message, line)  # a custom tool's output keeps its block
        return message.model_copy(update={"content": content, "response_metadata": meta})

    def _brief_blocks(
        self, message: BaseMessage, calls: Mapping[str, tuple[str, Any]], stats: PruneStats
    ) -> BaseMessage:
        """Brief the bulky tool results a message carries as blocks (Anthropic, Responses).

        Each ``tool_result`` / ``function_call_output`` block over
        ``tool_output_limit`` keeps its type, its call id and its other keys; only
        its result becomes the brief, which names the whole message's reference
        (the message is the original that recall gives back). Every other block
        stays as it is.
        """
        if isinstance(message.content, str):
            return message
        blocks: list[Any] = []
        briefed = 0
        for block in message.content:
            kind = block_type(block)
            if kind not in RESULT_CONTENT or not isinstance(block, dict):
                blocks.append(block)
                continue
            text, others = result_parts(block)
            images = sum(1 for b in others if block_type(b) in IMAGE_BLOCKS)
            rest = [b for b in others if block_type(b) not in IMAGE_BLOCKS]
            size = len(text) + images * IMAGE_TOKENS * 4
            if rest:
                size += len(dumps(rest))
            if size <= self.settings.tool_output_limit:
                blocks.append(block)
                continue
            cid = block.get(RESULT_BLOCKS[kind])
            name, args = calls.get(cid, ("tool", {})) if isinstance(cid, str) else ("tool", {})
            line = self._brief_line(name, args, text, images, message_ref(message))
            blocks.append({**block, RESULT_CONTENT[kind]: line})
            briefed += 1
        if not briefed:
            return message
        meta = {**message.response_metadata, METADATA_KEY: {"kind": "brief"}}
        stats.briefed += briefed
        return message.model_copy(update={"content": blocks, "response_metadata": meta})
