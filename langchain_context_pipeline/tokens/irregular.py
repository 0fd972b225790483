"""Charges for text that does not merge as words do: the estimate's hand-added terms.

:mod:`langchain_context_pipeline.tokens.estimate` charges a string by a fit over
natural text, where letters merge into words and marks into JSON, markup and
operators. Random keys, DNA and protein sequences, repeated letter patterns, random
marks and control characters merge almost nowhere; these charges cover them, with
C-speed ``bytes`` operations and big integers only (no Python loop over the text).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["MARKS", "Flags", "unmerged", "unworded"]

_NOT_LETTER = bytes(0 if 65 <= b <= 90 or 97 <= b <= 122 else 1 for b in range(256))
# What no word is made of. The fitted weights charge a run of letters as words, at
# about five letters a token; random identifiers and keys, DNA and protein
# sequences hold about two, and a repeated pattern of two to four letters
# ("abab...", "hahaha") merges no better than its pieces ("ab" * 1000 is 1,000
# tokens in every tokenizer). Charged: each five and each six consonants of one case
# in a row inside a run of at least eight letters of that case (a letter repeated is
# charged as such already), and each letter that repeats the one two, three or four
# before it, three in a row; inside runs of 13 letters or more, also each letter that
# repeats the one five to sixteen before it twice ("abcde" * 500 is 1,000 tokens in
# cl100k_base and was estimated at 366; a random pattern of nine to sixteen lowercase
# letters repeated, at as little as 0.23 of its count while only periods up to eight
# were looked for). Both are near zero in natural text, whose
# words have vowels and whose repeats are words, not pieces: on the token corpus
# the estimate rises 0.35% on the transcripts, 0.8% on base64 and less elsewhere. Known
# undercounts left: random words shorter than eight letters ("qzv xkw ..."), whose
# clusters are as short as words', random base32 shorter than about 1,000
# characters (its digits cut the letter runs; they are charged as digits), random
# lowercase alphanumerics and mixed-case letters shorter than about 400 (by up to
# 12% at 40 characters; measured, not changed by this charge), patterns of more
# than sixteen letters repeated, a short unit that mixes letters with digits or
# marks repeated without a newline ("oum;ge" * 250: its letter runs are short and
# read as words, 0.56 of the count; "ref=0badc0de" * 133, 0.83; 15-46% of random
# units of four to fourteen letters, digits and marks, each repeated to 1,600
# characters, in a probe; a line repeated, and a text that is one ASCII unit
# repeated, are charged copy by copy, see tokens.repeated), and "&", "@" or "^"
# between a word and a newline (no
# tokenizer merges them: 0.7 of the count, one word a line).
_VOWELS = frozenset(b"aeiouyAEIOUY")
_CASES_CONSONANTS = tuple(
    (
        bytes([low]),
        bytes(int(low <= b <= low + 25) for b in range(256)),
        bytes(int(low <= b <= low + 25 and b not in _VOWELS) for b in range(256)),
    )
    for low in (97, 65)
)
"""Per case (lower, upper): its letter in ``_CASES``, the tables of its letters and of
its consonants."""
_WORD_RUN = 8
"""Letters of one case in a row that make a run where consonant clusters are charged."""
_PER_CONSONANT_RUN5 = 4.0
_PER_CONSONANT_RUN6 = 4.0
_LETTERS = bytes(1 - flag for flag in _NOT_LETTER)
# A letter of a repeated pattern is charged about a token with the letter-run
# count: some pairs merge ("iy" * 500 is 500 tokens), others nowhere ("jy" * 500
# and "IY" * 500 are 1,000 in every tokenizer).
_PER_PATTERN_LETTER = 0.87
_PERIODS = (2, 3, 4)
_LONG_PERIODS = tuple(range(5, 17))
_LONG_RUN = b"a" * 13
_LONG_RUNS = re.compile(_LONG_RUN + b"+")  # a literal prefix: searched as bytes.find does
_RUN_GAP = bytes(max(_LONG_PERIODS))
_span = re.Match.span
_ZERO = bytes([1] + [0] * 255)
"""Maps a zero byte to 1 and every other byte to 0 (the equal bytes of an XOR)."""

# Punctuation that does not merge. The fitted weights charge punctuation by its
# pairs, as JSON, markup and operators merge ('", "', "});", "->"); random marks
# and control characters (binary read as text, line noise, escape sequences)
# merge almost nowhere: 1,000 random ASCII marks cost DeepSeek 697 tokens and were
# estimated at 327, "()" * 1000 is 1,000 tokens in cl100k_base and was estimated
# at 640. Charged: each control character other than tab, newline and carriage
# return, and each mark that ends four marks in a row and differs from the one
# before it (a run of one mark, "----" or "====", merges well and stays free).
MARKS = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_CONTROL = bytes(int((b < 32 and b not in (9, 10, 13)) or b == 127) for b in range(256))
_PUNCTUATION = bytes(int(b in MARKS or bool(_CONTROL[b])) for b in range(256))
_PER_CONTROL = 0.7
_PER_PUNCTUATION_RUN = 0.5

# A run of one mark. The fit charges it by its pairs, about 0.3 tokens a mark, and most
# marks merge further ("-" * 3000 is at most 49 tokens in every calibration tokenizer);
# these merge in pairs at best in at least one of them (cl100k_base has "((" and "[["
# but nothing longer), a token per two: "&" * 400 is 200 tokens and was estimated at
# 137, "[" * 3000 1,500 at 951, inside a line as well as alone (nested brackets,
# a model stuck on one mark). Charged: each such mark equal to the two before it
# (nothing for a pair, "()" or '""', nor for Python's triple quote beyond 0.2).
_PAIRED_MARKS = b"\"$&'(<[]`{}"
_PAIRED = bytes(int(b in _PAIRED_MARKS) for b in range(256))
_PER_PAIRED_RUN = 0.2


class Flags(NamedTuple):
    """Per-byte flags of one text as big integers (one byte each, 1 where true).

    Built once per text and shared by the charges above, so that none converts
    the text again.
    """

    whole: int
    """The text itself, little-endian."""
    letters: int
    """An ASCII letter."""
    same: int
    """Equal to the byte before (the first byte: equal to NUL)."""
    tripled: int
    """Equal to the two bytes before."""

    @classmethod
    def of(cls, data: bytes, size: int) -> Flags:
        """Return the flags of UTF-8 ``data`` of ``size`` bytes."""
        whole = int.from_bytes(data, "little")
        before = (whole ^ (whole << 8)).to_bytes(size + 1, "little")[:size]
        same = int.from_bytes(before.translate(_ZERO), "little")
        letters = int.from_bytes(data.translate(_LETTERS), "little")
        return cls(whole, letters, same, same & (same << 8))


def unworded(data: bytes, size: int, cases: bytes, classes: bytes, flags: Flags) -> float:
    """Charge the letters no word is made of (see ``_PER_PATTERN_LETTER``).

    ``cases`` is ``data.translate(_CASES)``, ``classes`` ``data.translate(_CLASSES)``.
    Byte flags as big integers (see :class:`Flags`): no Python loop over the text.
    """
    if size < _WORD_RUN:
        return 0.0
    tripled = flags.tripled
    cost = 0.0
    for case, letters_table, consonants_table in _CASES_CONSONANTS:
        if case * _WORD_RUN not in cases:  # no run of that case to look in
            continue
        consonants = int.from_bytes(data.translate(consonants_table), "little") & ~tripled
        cased = int.from_bytes(data.translate(letters_table), "little")
        runs = cased & (cased >> 8)  # where _WORD_RUN letters start, by doubling
        runs &= runs >> 16
        runs &= runs >> 32
        inside = runs | (runs << 8)  # every letter of those runs
        inside |= inside << 16
        inside |= inside << 32
        five = consonants & (consonants >> 8)
        five &= five >> 16
        five &= (consonants >> 32) & inside
        cost += _PER_CONSONANT_RUN5 * five.bit_count()
        cost += _PER_CONSONANT_RUN6 * (five & (consonants >> 40)).bit_count()
    patterned = _patterned(flags, size, long=False)
    # A longer pattern can only be where 13 letters or more are in a row: those
    # runs alone are searched for it (with NULs between them, which no period
    # reaches across), and charged for the letters the short patterns left.
    if _LONG_RUN in classes:
        spans = map(_span, _LONG_RUNS.finditer(classes))
        long_runs = _RUN_GAP.join([data[start:end] for start, end in spans])
        in_runs = Flags.of(long_runs, len(long_runs))
        patterned += _patterned(in_runs, len(long_runs), long=True)
        patterned -= _patterned(in_runs, len(long_runs), long=False)
    return cost + patterned


def _patterned(flags: Flags, size: int, *, long: bool) -> float:
    """Charge the letters that repeat a pattern, three in a row (not a letter tripled).

    A letter repeats a pattern where it equals the one two, three or four after
    it; with ``long``, also where it equals the one five to sixteen after it and
    that one the next five to sixteen after (a longer period must repeat twice:
    words recur at such distances in natural text, but rarely twice in a row).
    """
    whole, letters = flags.whole, flags.letters
    pattern = 0
    for period in _PERIODS:
        equal = (whole ^ (whole >> (8 * period))).to_bytes(size, "little").translate(_ZERO)
        pattern |= int.from_bytes(equal, "little") & (letters >> (8 * period))
    for period in _LONG_PERIODS if long else ():
        shift = 8 * period
        equal = (whole ^ (whole >> shift)).to_bytes(size, "little").translate(_ZERO)
        repeated = int.from_bytes(equal, "little") & (letters >> shift)
        pattern |= repeated & (repeated >> shift)
    pattern &= letters & ~flags.tripled
    return _PER_PATTERN_LETTER * (pattern & (pattern >> 8) & (pattern >> 16)).bit_count()


def unmerged(data: bytes, size: int, classes: bytes, flags: Flags) -> float:
    """Charge the control characters and the punctuation that does not merge.

    See ``_PER_CONTROL``, ``_PER_PUNCTUATION_RUN`` and ``_PER_PAIRED_RUN``.
    """
    cost = _PER_CONTROL * data.translate(_CONTROL).count(1)
    if size >= 3 and b"..." in classes:
        paired = int.from_bytes(data.translate(_PAIRED), "little") & flags.tripled
        cost += _PER_PAIRED_RUN * paired.bit_count()
    if size < 4 or b"...." not in classes:
        return cost
    marks = int.from_bytes(data.translate(_PUNCTUATION), "little")
    runs = marks & (marks << 8) & (marks << 16) & (marks << 24) & ~flags.same
    return cost + _PER_PUNCTUATION_RUN * runs.bit_count()
