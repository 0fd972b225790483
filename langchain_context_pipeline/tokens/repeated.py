"""A bound for text that repeats its lines: a repeated line charged copy by copy.

The fitted estimate (:mod:`~langchain_context_pipeline.tokens.estimate`) bounds
natural text, where its error on one line (over on some lines, under on others)
averages out over many different lines, and its square-root margin assumes errors
that add up like a random walk. Text that repeats one line many times (a warning
printed in a loop, ``yes | head``, a log of retries) repeats that line's error
instead: before this bound, of 600 lines of the token corpus each repeated 60
times, 42 were estimated under the costliest tokenizer, at worst 0.69 of its count
(``"gcrs.py"``).

So a text whose repeated lines make at least half its lines and half its bytes is
also charged its distinct lines once (as one text) plus, for every further copy of
a line, a share of the estimate of a few copies of that line and its newline, as a
string of their own (:data:`LINE_SHARED`), and the estimate is the larger of this
bound and the fitted one. Tokenizers split text at newlines, so the copies' costs
add up, and the share bounds a copy: of 6,000 distinct lines of the token corpus
and the bundled transcripts, each repeated 5, 20 or 100 times, one line's share (a
random id's) was below what one copy costs in context in one of the five
tokenizers, by 6%. (The estimates here are the fit's, without this bound.)

Natural text rarely has half its bytes in repeated lines (none of the corpus's
transcripts, code or prose does); what does is charged more than before: a pretty
JSON config of 25 alike objects and a log of one stack trace repeated eight times,
1.5x and 1.7x the costliest tokenizer (were 1.16x and 1.57x). Left: a unit repeated
without a newline between its copies (a phrase an LLM repeats in a loop, a path or
key repeated). Measured: of 800 pieces of corpus lines repeated without a break, 77
were estimated under the costliest tokenizer, at worst 0.56, and the pipeline sent
``"src/app.py" * 3000`` at about 1.1x a threshold of 1,500 cl100k tokens (random
units, up to 2x). Charging each copy a third of three copies' estimate, as lines
are, bounded every piece of 15 characters or more tried, but charged a short phrase
repeated 1.6-2.7x what it costs (``"hello world " * 200`` 2.2x, ``"word " * 200``
2.7x, against 1.1x by the fit), and 17 of this project's own tests, which size their
messages with such phrases, changed what they kept: that trade was not taken. Such
text is left to the fit: see :mod:`~langchain_context_pipeline.tokens.irregular`
for what it covers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

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
    distinct lines and the copies are estimated as texts of their own). One
    C-speed split and count; a loop over the distinct lines only where half the
    lines repeat.
    """
    if len(text) < _MIN_SIZE or "\n" not in text:
        return 0
    counts = Counter(text.split("\n"))
    if len(counts) * 2 > sum(counts.values()):
        return 0  # most lines are distinct: nothing close to half the text repeats
    repeated = sum((count - 1) * (len(line) + 1) for line, count in counts.items())
    if repeated * 2 < len(text):
        return 0
    copies = sum(
        (count - 1) * estimate((line + "\n") * LINE_SHARED) / LINE_SHARED
        for line, count in counts.items()
        if count > 1
    )
    return math.ceil(estimate("\n".join(counts)) + copies)
