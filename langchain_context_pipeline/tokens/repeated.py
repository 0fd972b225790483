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

Left: a unit repeated with no newline, comma, semicolon or space between its copies
(a path or key repeated, ``"==>" * 1000``: 0.97 of o200k_base's count). Measured: of 800
pieces of corpus lines repeated without a break, 77 were estimated under the
costliest tokenizer, at worst 0.56, and the pipeline sent ``"src/app.py" * 3000`` at
about 1.1x a threshold of 1,500 cl100k tokens (random units, up to 2x). Charging
each copy a third of three copies' estimate, as lines are, bounded every piece of 15
characters or more tried, but charged a short phrase repeated 1.6-2.7x what it costs
(``"hello world " * 200`` 2.2x, ``"word " * 200`` 2.7x, against 1.1x by the fit),
and 17 of this project's own tests, which size their messages with such phrases,
changed what they kept: that trade was not taken. Such text is left to the fit: see
:mod:`~langchain_context_pipeline.tokens.irregular` for what it covers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Container

from langchain_context_pipeline.tokens.known_words import KNOWN_WORDS

__all__ = ["LINE_SHARED", "repeated_bound"]

LINE_SHARED = 3
"""Copies of a line that share one estimate's per-string constant and margin: a
copy is charged a third of three copies' estimate. One copy alone would be charged
them all, 1.6x what a copy costs in the median; three share them at 1.4x, and
still bound all but one of the 6,000 lines (a random id, at 0.94)."""

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
    largest bound. C-speed splits and a count; a loop over the
    lines only where half of them repeat.
    """
    if len(text) < _MIN_SIZE:
        return 0
    data = text.encode("utf-8", "surrogatepass")  # once, for either line end
    bound = 0
    for end in _LINE_ENDS:
        if end in text:
            bound = max(bound, _lines_bound(text, data, end, estimate))
    return bound


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


def _lines_bound(text: str, data: bytes, end: str, estimate: Callable[[str], int]) -> int:
    """:func:`repeated_bound` of ``text`` (``data``: its UTF-8) cut into lines at ``end``."""
    sep = end.encode()
    shapes = data.translate(None, _DIGITS).split(sep)
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
