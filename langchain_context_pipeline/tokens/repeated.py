"""A bound for text that repeats its lines: a repeated line charged copy by copy.

The fitted estimate (:mod:`~langchain_context_pipeline.tokens.estimate`) bounds
natural text, where its error on one line (over on some lines, under on others)
averages out over many different lines, and its square-root margin assumes errors
that add up like a random walk. Text that repeats one line many times (a warning
printed in a loop, ``yes | head``, a log of retries) repeats that line's error
instead: before this bound, of 600 lines of the token corpus each repeated 60
times, 42 were estimated under the costliest tokenizer, at worst 0.69 of its count
(``"gcrs.py"``).

Lines that differ only by their digits (a counter, a timestamp, a figure: ``[7]
retrying``, ``Epoch 12/500 - loss: 0.1234``) repeat the error as copies do: of 600
corpus lines each printed 60 times with a counter, 28 were estimated under the
costliest tokenizer, and the pipeline sent a log of 1,500 numbered lines at 1.08x a
9,000-token threshold (Qwen 3). So lines are compared with their digits taken out
(lines of digits and a few marks too: 500 phone numbers, ``+1-555-123-4567``, were
estimated at 0.98 of Qwen's count, which is about a token a byte).
And a file's content in a tool call's arguments is one JSON string, its newlines
escaped (a backslash and an ``n``): split at real newlines only, 11 of 200 such
contents of repeated corpus lines were estimated under the costliest tokenizer (at
worst 0.83), and the pipeline sent a request of 400 numbered lines written to a file
at 1.08x a 4,000-token threshold. So a line also ends at an escaped newline, and
the larger of the two bounds is taken.

A list written on one line is such a text too, its items the lines: ids joined by
commas (``item_0, item_1, ...``), ``key=value`` pairs joined by semicolons, a
compact JSON array of numbers. Its items, alike but for their digits, repeat the
fit's error as lines do: ``", ".join(f"item_{i}" for i in range(3000))`` was
estimated at 0.92 of Qwen 3's count, and the pipeline sent such tool output at up to
1.08x its threshold (19 of 28 agent loops at thresholds of 2,000 to 16,000 went over
by Qwen 3); a compact array of numbers, ``[0,1,2,...]``, estimated at 0.996 of
Qwen's count (a byte a token), went over by a few tokens in 3 of 28. So a line also
ends at a comma and at a semicolon, each bound computed on its own, and the largest
is taken; cut there, a text is a list when one kind of item (so compared) makes half
its items. The fields of records and the cells of rows are several kinds, each
repeating, that the fit bounds already (800 JSON records of four fields: 1.2x the
costliest tokenizer); charged item by item, they were charged up to a quarter more
(1.5x), and the corpus's csv, JSON and JSON-lines samples 10-19% more. Of 321 lists
(ids with ten prefixes, numbered or not, and 240 of random units of 2 to 30
characters, joined by ``,``, ``, ``, ``;`` or ``; ``), 46 were under the costliest
tokenizer before and one is now (a random unit, ``"*]9Gp"``, at 0.94); of 800 lists
of corpus words (numbered, with random numbers, or one word repeated), 184 were
under and one is (at 0.999). No corpus sample or bundled transcript is charged
differently (one csv sample by 2 tokens); a JSON array of ids (``["user_0",
"user_1", ...]``) is charged 1.3x (1.03x before), and so is a phrase with a comma
printed again and again (``"Here is the log of the run, line by line. " * 60``:
1.28x, 1.05x before).

A text whose repeated lines (so compared) make at least half its lines and half its
bytes is also charged the first line of each kind once (as one text) plus, for
every further line, a share of the estimate of a few copies of that line and its
newline, as a string of their own (:data:`LINE_SHARED`), and the estimate is the
larger of this bound and the fitted one. Tokenizers split text at newlines, so the
copies' costs add up, and the share bounds a copy: of 6,000 distinct lines of the
token corpus and the bundled transcripts, each repeated 5, 20 or 100 times, one
line's share (a random id's) was below what one copy costs in context in one of the
five tokenizers, by 6%. (The estimates here are the fit's, without this bound.)

Natural text rarely has half its bytes in repeated lines (none of the corpus's
transcripts, code or prose does); what does is charged more than before: a pretty
JSON config of 25 alike objects and a log of one stack trace repeated eight times,
1.6x and 1.8x the costliest tokenizer (1.2x and 1.65x by the fit alone; 1.55x and
1.8x when only exact copies were compared); for their alike lines, pretty JSON
records 1.3x (1.1x by the fit), a table of results 1.3x (1.2x), Python tracebacks
1.4x (1.25x), nginx and syslog logs 1.17x and 1.3x (1.13x and 1.25x), sensor
readings in csv 1.07x (1.04x).

A unit repeated with spaces between its copies (a status printed again and again,
``"DONE DONE ..."``, a model stuck in a loop, words joined by ``" | "``) repeats the
fit's error too: ``"LOREM " * 3000`` was estimated at 0.55 of o200k_base's count,
``"DONE " * 3000`` at 0.76 of DeepSeek's, a word repeated with two spaces between its
copies at 0.53 of DeepSeek's (which reads a word after two spaces without its space,
in more pieces); of 1,920 corpus words, as they are and in capitals, joined 30 or 400
times by one or two spaces, a bar or a dash, 238 were under the costliest tokenizer.
So a line also ends at a space, with the one-kind rule of lists, and two more: when
empty items (runs of spaces: indentation, aligned columns) are the commonest kind, the
text is left to the fit, which charges runs of spaces (a token each, indentation
would cost several times its count); and where no two spaces meet, a copy of a word
every calibration tokenizer encodes after a space as one token
(:data:`~langchain_context_pipeline.tokens.known_words.KNOWN_WORDS`) is charged one
token, and a text whose copies are all such words is left to the fit, which charges
each about 1.05 (``"word " * 500``, ``"hello world " * 200``: charged a third of
three copies' estimate, they would cost 2.2-2.7x their count). None of the 1,920 is
under now; no corpus sample or text of the bundled transcripts is charged
differently. Costs: units that are no known word, repeated, are charged 1.1-2x
(``"DONE " * 3000`` 1.67x DeepSeek's count, ``"- " * 1500`` 2x cl100k_base's; ids
joined by spaces, ``item_0 item_1 ...``, 1.37x Qwen 3's, 1.0x before).

A unit repeated with no break at all between its copies (a path or a key repeated,
``"src/app.py" * 3000``; words joined by a mark, ``"ecliptic->" * 400``; a model
stuck mid-word) repeats it too: of 778 pieces of corpus lines (3 to 30 characters)
repeated to about 3,000 characters, 61 were estimated under the costliest tokenizer
(at worst 0.58, ``"        {"``; ``"oum;ge" * 250``, 0.56), of corpus words joined
by ``|``, ``/``, ``->``, ``.`` or ``:``, a quarter to a half (at worst 0.54), and the
pipeline sent ``"src/app.py" * 3000`` at about 1.1x a threshold of 1,500 cl100k
tokens. So a text that is exactly one ASCII unit without whitespace repeated (its
period found where its first 64 characters come back, then checked by comparing the
text with itself shifted) is also charged copy by copy: half of two copies' estimate
a copy (:data:`UNIT_SHARED`), a unit of up to four characters its own estimate (about
its length: two copies of marks, ``'"&'``, merge less than two copies' estimate
assumes). Left to the fit, each for a measured reason: a run of one character
(``"x" * 5000``: tokenizers merge runs, and the fit charges them, a run of a mark that
merges in pairs only, ``"&" * 400``, at a token per two: see
:mod:`~langchain_context_pipeline.tokens.irregular`); a unit with
whitespace (a phrase, a line: cut at spaces and newlines above; charged copy by copy,
the test fixtures' ``"Now summarise what the logs say. " * N`` rose 1.6x and 13 of
this project's tests changed what they kept); a unit in another script (CJK repeated,
``"你好世界" * 3000``, rose from 1.49x to 2.1x cl100k_base's count, and the per-character
bound covers it). Measured: no corpus sample or text of the bundled transcripts is
charged differently (one corpus sample is one unit repeated, a stack trace printed
eight times, with newlines); of the 778 pieces, 29 are under (each a unit with runs
of spaces, as indentation inside it, at worst 0.58); of words joined by marks, units
of random capitals still are (``"GZTJ|"`` 0.90, ``"OCSPEJSXWALZ|"`` 0.83: random
letters shorter than eight, which :mod:`~langchain_context_pipeline.tokens.irregular`
names). Costs: such text is charged up to its UTF-8 length (``"==>" * 1000`` 1.5x
o200k_base's count, ``"src/app.py" * 3000`` 1.38x cl100k_base's).

Copies with no break that are not the whole text repeat the error as well: after a
preamble (a line before ``"fdefb|" * 300``: 0.56 of the count), before a line, or cut
in the middle by truncation (its marker between two stretches of copies: the hook
with reported usage sent ``"src/app.py" * 396`` so cut at 3,236 cl100k_base tokens at
a threshold of 3,079). So one stretch of copies that makes half the text (found around
its middle, which such a stretch holds) and stretches at both ends that together do
are charged copy by copy too, the rest by its estimate. Of 88 such texts (11 units,
40 or 300 copies, cut, after a preamble, before a line, or both), 54 were under the
costliest tokenizer, 12 are (random capitals, as above, and cuts of 40 copies that
leave less than half of the text to copies). No corpus sample or text of the bundled
transcripts is charged differently.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Container

from langchain_context_pipeline.tokens.known_words import KNOWN_WORDS

__all__ = ["LINE_SHARED", "UNIT_SHARED", "repeated_bound"]

LINE_SHARED = 3
"""Copies of a line that share one estimate's per-string constant and margin: a
copy is charged a third of three copies' estimate. One copy alone would be charged
them all, 1.6x what a copy costs in the median; three share them at 1.4x, and
still bound all but one of the 6,000 lines (a random id, at 0.94)."""

UNIT_SHARED = 2
"""Copies of a unit repeated with no break that share one estimate: a copy is charged
half of two copies' estimate. Copies with no break merge across their boundaries as
no two lines do: of 1,500 pieces of corpus lines (3 to 15 characters) each repeated 20
times, a third of three copies' estimate was under the costliest tokenizer's count for
one (at 0.83), half of two for none (1.83x in the median)."""

_SHORT_UNIT = 4
"""A unit of at most this many characters is charged its estimate alone, a copy."""

_MIN_SIZE = 16
"""Texts shorter than this are left to the fit and its margin."""


def repeated_bound(text: str, estimate: Callable[[str], int]) -> int:
    """Return the bound of a text that repeats its lines (0 when it does not).

    ``estimate`` is the fitted estimate of one string (without this bound: the
    distinct lines and the copies are estimated as texts of their own). A line
    repeats an earlier one when it is the same once the digits of both are taken
    out: a copy, or a line that differs only by a counter, a timestamp or a figure
    (``Epoch 12/500 - loss: 0.1234``). Lines end at a newline, at a newline escaped
    as JSON writes it (a backslash and an ``n``: a file's content in a tool call's
    arguments), at a comma or a semicolon (the items of a list on one line), or at a
    space (a unit repeated with spaces between its copies), whichever gives the
    largest bound; a text that is one ASCII unit repeated with no break is charged
    copy by copy too. C-speed splits and a count; a loop over the
    lines only where half of them repeat.
    """
    if len(text) < _MIN_SIZE:
        return 0
    bound = _period_bound(text, estimate)
    data = text.encode("utf-8", "surrogatepass")  # once, for either line end
    for end in _LINE_ENDS:
        if end in text:
            bound = max(bound, _lines_bound(text, data, end, estimate))
    return bound


_PROBE = 64
"""Characters at the start of a text whose next occurrence gives its period."""

_TRIES = 16
"""Occurrences of the probe tried as the period before a text is taken as no repeat."""

_CHECK = 1024
"""Characters compared at a try before the whole text is (a cheap check first)."""


def _period(text: str) -> int:
    """Return the length of the unit ``text`` repeats (its last copy may be cut).

    0 when ``text`` is not one unit repeated, at least twice (1 for a run of one
    character).
    """
    size, length = _run(text)
    return size if length == len(text) else 0


def _run(text: str) -> tuple[int, int]:
    """Return ``(period, length)`` of the stretch at the start of ``text`` that repeats.

    :func:`_stretch` at the first character, its probe at most half the text.
    """
    _, period, length = _stretch(text, 0, min(_PROBE, len(text) // 2))
    return period, length


def _common(text: str, shift: int, at: int = 0) -> int:
    """Return how many characters ``text[at + shift:]`` has in common with ``text[at:]``.

    The whole rest first (a cheap look at its start, then one comparison that stops at
    the first difference), else a binary search of such comparisons.
    """
    end = len(text) - shift
    rest = text[at + shift : at + shift + _CHECK]
    if text.startswith(rest, at) and text[at + shift :] == text[at:end]:
        return end - at
    low, high = 0, end - at
    while low < high:
        middle = (low + high + 1) // 2
        if text.startswith(text[at + shift : at + shift + middle], at):
            low = middle
        else:
            high = middle - 1
    return low


def _stretch(text: str, at: int, size: int = _PROBE) -> tuple[int, int, int]:
    """Return ``(start, period, length)`` of the stretch of ``text`` that repeats at ``at``.

    The longest stretch around ``at`` that repeats one unit with no break, at least
    twice (``(0, 0, 0)`` for none). The period is where the ``size`` characters at ``at``
    come back (at most :data:`_TRIES` places are tried); the stretch is followed forward
    and backward (on the reversed text) by :func:`_common`.
    """
    n = len(text)
    probe = text[at : at + size]
    if not probe or len(probe) < size:
        return 0, 0, 0
    backwards: str | None = None
    best = (0, 0, 0)
    start = text.find(probe, at + 1)
    for _ in range(_TRIES):
        if start <= 0:
            break
        period = start - at
        forward = _common(text, period, at)
        back = 0
        if at:  # nothing before the first character
            backwards = text[::-1] if backwards is None else backwards
            back = _common(backwards, period, n - at - period)
        length = back + period + forward
        if length >= 2 * period and length > best[2]:
            best = (at - back, period, length)
            if length == n:
                break  # the whole text
        start = text.find(probe, start + 1)
    return best


def _copies(text: str, size: int, length: int) -> tuple[str, int] | None:
    """Return the unit of a stretch of copies at the start of ``text`` and its whole copies.

    None when the unit is not charged copy by copy: a run of one character (the fit's),
    another script (charged by its characters) or a unit with whitespace (a phrase or
    a line, cut at its spaces or newlines instead).
    """
    if size <= 1:
        return None
    unit = text[:size]
    if not unit.isascii() or unit.split(maxsplit=1) != [unit]:
        return None
    return unit, length // size


def _shared(unit: str, estimate: Callable[[str], int]) -> float:
    """Return what one copy of ``unit`` is charged among copies with no break.

    A unit of a few bytes is charged its estimate alone, which is about its length (no
    tokenizer spends more than a token a byte): two copies of marks (``'"&'``) merge
    less than two copies' estimate assumes.
    """
    share = 1 if len(unit) <= _SHORT_UNIT else UNIT_SHARED
    return estimate(unit * share) / share


def _period_bound(text: str, estimate: Callable[[str], int]) -> int:
    """:func:`repeated_bound` of ASCII units repeated with no break (else 0).

    The whole text one unit repeated, one stretch of copies that makes half of it (a
    preamble before the copies, a line after them), or stretches of copies at its start
    and its end that do (a repeated text cut in the middle, a marker between the two
    halves): the copies charged copy by copy, the rest by its estimate.
    """
    n = len(text)
    size, length = _run(text)
    head = _copies(text, size, length) if length else None
    if length == n:
        if head is None:
            return 0
        unit, copies = head
        return math.ceil(copies * _shared(unit, estimate) + estimate(text[copies * len(unit) :]))
    # One stretch that makes half the text holds its middle (copies between a preamble
    # and what follows them).
    bound = 0
    start, size, length = _stretch(text, n // 2)
    middle = _copies(text[start:], size, length) if length * 2 >= n else None
    if middle is not None:
        unit, copies = middle
        end = start + copies * len(unit)
        charged = copies * _shared(unit, estimate)
        bound = math.ceil(charged + estimate(text[:start]) + estimate(text[end:]))
    # Copies at both ends (a repeated text cut in its middle, a marker between them).
    tail = None
    if head is not None and text.rfind(text[-min(_PROBE, n // 2) :], 0, n - 1) >= 0:
        backwards = text[::-1]  # the end comes back: copies end the text, maybe
        tail = _copies(backwards, *_run(backwards))
    if head is None or tail is None:
        return bound
    (unit, copies), (tail_unit, tail_copies) = head, tail
    covered, tail_covered = copies * len(unit), tail_copies * len(tail_unit)
    if (covered + tail_covered) * 2 < n or covered + tail_covered > n:
        return bound  # little of it is copies, or one stretch: the middle's
    charged = copies * _shared(unit, estimate) + tail_copies * _shared(tail_unit[::-1], estimate)
    return max(bound, math.ceil(charged + estimate(text[covered : n - tail_covered])))


_ITEM_ENDS = (",", ";")
"""What ends the items of a list written on one line: such a list is one kind of item
(half its items alike), not the fields of records or the cells of rows."""

_SPACE = " "
"""What ends a unit repeated with spaces between its copies (``"LOREM LOREM ..."``)."""

_LINE_ENDS = ("\n", "\\n", *_ITEM_ENDS, _SPACE)
"""What ends a line: a newline, a newline escaped in a JSON string, what ends the
items of a list written on one line, and a space."""

_DIGITS = b"0123456789"

_ZEROS = bytes.maketrans(b"123456789", b"000000000")


def _shapes(data: bytes, sep: bytes) -> list[bytes]:
    """Return the lines of ``data`` cut at ``sep``, each with its digits taken out.

    Cut first: taking the digits out first could make a line end where there was
    none (a backslash, digits and an ``n``, as in a Windows path to ``2new``, read as an
    escaped newline), and the lines of the text and of its shapes would not pair up.
    The lines are joined by a NUL for one C-speed pass, unless the text holds one.
    """
    lines = data.split(sep)
    if b"\x00" in data:
        return [line.translate(None, _DIGITS) for line in lines]
    return b"\x00".join(lines).translate(None, _DIGITS).split(b"\x00")


def _lines_bound(text: str, data: bytes, end: str, estimate: Callable[[str], int]) -> int:
    """:func:`repeated_bound` of ``text`` (``data``: its UTF-8) cut into lines at ``end``."""
    sep = end.encode()
    shapes = _shapes(data, sep)
    if len(set(shapes)) * 2 > len(shapes):
        return 0  # most lines are unalike: nothing close to half the text repeats
    known: Container[bytes] = ()
    if end in _ITEM_ENDS or end == _SPACE:
        counts = Counter(shapes)
        top, most = counts.most_common(1)[0]
        if most * 2 < len(shapes):
            return 0  # items of several kinds (records, rows, prose): no list of one kind
        if end == _SPACE:
            if not top:
                return 0  # runs of spaces (indentation, columns): the fit's
            if "  " not in text:
                known = KNOWN_WORDS  # one space before each: a known word is one token
    kinds: set[bytes] = set()
    first: list[str] = []
    # Lines by their digits written as zeros: the fit reads a digit by its class,
    # never by its value, so lines alike to the digit are estimated once.
    further: Counter[bytes] = Counter()
    sample: dict[bytes, str] = {}
    repeated = 0
    masks = data.translate(_ZEROS).split(sep)
    for line, mask, shape in zip(text.split(end), masks, shapes, strict=True):
        if shape not in kinds:
            kinds.add(shape)
            first.append(line)
            continue
        # A line alike but for its digits counts whole: lines of digits and a few marks
        # (phone numbers, ids) cost Qwen about a token a byte, and the fit errs on
        # them as on copies (500 "+1-555-123-4567" lines: 0.98 of Qwen's count).
        repeated += len(mask) + len(sep)
        further[mask] += 1
        sample.setdefault(mask, line)
    if repeated * 2 < len(data) or all(mask in known for mask in further):
        return 0  # little repeats, or known words only: one token each, as the fit charges
    copies = sum(
        count * (1 if mask in known else estimate((sample[mask] + end) * LINE_SHARED) / LINE_SHARED)
        for mask, count in further.items()
    )
    return math.ceil(estimate(end.join(first)) + copies)
