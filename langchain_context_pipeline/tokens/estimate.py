"""A content-aware token estimate that stays above real tokenizers.

``ceil(chars / 4)`` undercounts everything that is not English prose: Chinese and
Japanese cost a token or more per character, JSON and logs about one per two or
three characters, digits one each (Qwen splits every digit), base64 and hashes
about one per one and a half. :func:`text_tokens` charges a string by what it is
made of, measured with C-speed ``bytes`` operations only (no per-character Python
loop; one regular expression, a literal search for long letter runs), so that it
can sit on the no-op path of every model call.

How it works. The string is encoded to UTF-8 and every byte is mapped by one
``bytes.translate`` to a class: letter, digit, space, newline, tab, other ASCII
(punctuation), UTF-8 continuation byte, or the script group given by a UTF-8 lead
byte (Latin-1 and Latin extended, Greek/Cyrillic, Hebrew/Arabic, Indic and Thai,
other 3-byte scripts, symbols, kana, CJK ideographs, Hangul, 4-byte emoji and
rare ideographs). The estimate is a weighted sum of a few counts over that class
string:

* class changes between neighbouring bytes (counted at C speed by XOR-ing the
  class string with itself shifted by one byte, as two big integers), which
  tracks the pre-tokens every BPE tokenizer starts from; a non-ASCII character
  always makes two changes, so it is charged about one token before its script
  surcharge;
* digits (Qwen charges one token per digit), uppercase letters, long letter runs
  (``count`` of six letters in a row), punctuation pairs, space pairs,
  newlines, tabs, a space before a digit, letter/digit and punctuation/letter
  boundaries (hashes, identifiers, paths);
* what no word is made of (added by hand after the fit, as the repeated-letter
  charge was): clusters of five or six consonants inside long letter runs
  (random keys, DNA and protein sequences) and letters repeating a pattern of two
  to four ("abab..."), or of five to eight twice in a row inside long letter
  runs ("abcdeabcde..."), near zero in natural text;
* punctuation that does not merge (added by hand too): control characters, and
  marks that end four marks in a row and differ from the one before ("()()",
  random marks; "----" stays free);
* where words are short and separators dense (added by hand too): a newline after
  a letter, a mark between a word and a space or a newline, two spaces after a
  word, each about the token it is;
* words after a space that no tokenizer has as one token (other languages written
  in ASCII, rare and made-up words), each charged the two tokens or more it costs,
  and the words every tokenizer knows, not charged as runs of letters (added by
  hand too; one regular expression finds the words, a shipped list of 29,726 tells
  the known ones);
* a mark joined to a word that every tokenizer knows as one token (``"/lib"``,
  ``"_name"``, ``".py"``: paths, snake_case, file extensions) where it starts a
  pre-token of its own, and such a word alone after a space and a mark (JSON's
  ``"key"``), not charged as a run of letters nor, in full or in part, as a
  punctuation/letter boundary (added by hand too; two more regular expressions,
  and 3,539 joined and 13,808 bare words in the same list);
* a per-character surcharge for each non-ASCII script group;
* a constant of three tokens per string, and a margin of 0.6 times the square
  root of the UTF-8 length (errors on short pieces are a few tokens either way).

The weights were fitted by linear programming so that the estimate is at least
the count of each of cl100k_base, o200k_base, Llama 3, Qwen 3 and DeepSeek on
every sample of ``tests/data/token_corpus`` and on pieces of them, while keeping
English prose and code as close to cl100k_base as these features allow; then
rounded up. The result is capped at the UTF-8 length, which no byte-level BPE
tokenizer can exceed (every token is at least one byte).

Random characters. The fit covers natural text, where characters merge into
words; a string of random characters of one script has no such merges (500
random symbols of U+2000-2BFF cost cl100k_base 2.5 times the fitted estimate,
CJK extension A twice, Cyrillic 1.8 times). So a string with non-ASCII
characters is also bounded by what its characters cost one by one, and charged
the larger of the two: the fitted estimate of its ASCII part, plus for every
other character the most tokens any of the five tokenizers spends on it alone
(1 to 3, capped by its UTF-8 length; 4 beyond the BMP), plus a token wherever
those characters split the ASCII around them (after ASCII other than a space,
after two spaces, after a space the character does not join), plus 2. A string
never costs more than its characters alone in these tokenizers (byte-level BPE
only merges; property-tested), so the bound holds for any mixture of scripts.
The costs of the BMP are a 64 KiB table (``_char_costs.bin``, built by
``scripts/build_char_costs.py``) applied by one ``str.translate`` and counted by
``str.count``: no Python loop, but this path costs about three times the fitted
one; pure ASCII never takes it. Qwen tokenizes the NFC form, which for a few
characters is longer than the text (U+0F76 is three bytes and becomes six): a string
that is not NFC is charged at least the estimate of its NFC form.

Agents re-count the same strings every turn, so results are memoised by the
string's value (a ``str`` caches its own hash, so a hit costs a dict lookup, and a
string cannot change under its entry). The memo is bounded by the memory of the
strings it holds, not by their number: a history longer than a count bound would
be looked up in order and miss on every string (least recently used is always
the next one asked for), so the cost per message would jump from a lookup to a
full estimate as the history grows. Cold, the estimate costs about 120-160 ns per
character on the token corpus's code and transcripts (about 20 of them the charge
for what no word is made of, about 15 the known pieces' credits); over an agent run
that re-counts the history before every turn, with its memo, about 3x
``count_tokens_approximately`` (``benchmarks/token_ratios.md``).
"""

from __future__ import annotations

import math
import re
import sys
import threading
import unicodedata
import zlib
from collections.abc import Callable, Hashable
from importlib import resources
from itertools import repeat
from typing import NamedTuple, TypeVar

__all__ = ["Memo", "text_tokens"]


def _class_table() -> bytes:
    table = bytearray(b"." * 256)
    for byte in range(ord("a"), ord("z") + 1):
        table[byte] = ord("a")
    for byte in range(ord("A"), ord("Z") + 1):
        table[byte] = ord("a")
    for byte in range(ord("0"), ord("9") + 1):
        table[byte] = ord("0")
    table[ord(" ")] = ord(" ")
    table[ord("\n")] = ord("\n")
    table[ord("\r")] = ord("\t")
    table[ord("\t")] = ord("\t")
    for byte in range(0x80, 0xC0):  # UTF-8 continuation bytes
        table[byte] = ord("c")
    for group, leads in _SCRIPT_LEADS.items():
        for byte in leads:
            table[byte] = group[0]
    return bytes(table)


_SCRIPT_LEADS: dict[bytes, range] = {
    b"L": range(0xC2, 0xCC),  # U+0080-02FF: Latin-1, Latin extended, IPA
    b"M": range(0xCC, 0xCE),  # U+0300-037F: combining marks
    b"G": range(0xCE, 0xD6),  # U+0380-057F: Greek, Cyrillic, Armenian
    b"H": range(0xD6, 0xE0),  # U+0580-07FF: Hebrew, Arabic, Syriac, Thaana
    b"I": range(0xE0, 0xE1),  # U+0800-0FFF: Indic scripts, Thai, Lao, Tibetan
    b"J": range(0xE1, 0xE2),  # U+1000-1FFF: Myanmar, Georgian, Ethiopic, Khmer, Vietnamese
    b"S": range(0xE2, 0xE3),  # U+2000-2FFF: punctuation, symbols, arrows, math, dingbats
    b"K": range(0xE3, 0xE4),  # U+3000-3FFF: CJK punctuation, kana, extension A
    b"Z": range(0xE4, 0xEA),  # U+4000-9FFF: CJK unified ideographs
    b"W": range(0xEA, 0xEE),  # U+A000-DFFF: Yi, Hangul syllables, surrogates
    b"F": range(0xEE, 0xF0),  # U+E000-FFFF: private use, compatibility, fullwidth, selectors
    b"E": range(0xF0, 0xF5),  # U+10000 and up: emoji, rare ideographs, math letters
}

_CLASSES = _class_table()
_CASES = bytes(
    ord("a") if 97 <= byte <= 122 else ord("A") if 65 <= byte <= 90 else ord(".")
    for byte in range(256)
)

_PER_STRING = 3.0
_MARGIN_PER_SQRT_BYTE = 0.6
_PER_CLASS_CHANGE = 0.48
_PER_UPPERCASE = 0.13
_PER_CASE_RISE = 1.94  # a lowercase then an uppercase letter: camelCase, base64
# A letter repeated three times or more ("zzzz...", filler, padding): most letters
# tokenize at two per token in long runs, where the letter-run count charges 0.13.
_PER_REPEATED_LETTER = 0.4
_NOT_LETTER = bytes(0 if 65 <= b <= 90 or 97 <= b <= 122 else 1 for b in range(256))
# What no word is made of. The fitted weights charge a run of letters as words, at
# about five letters a token; random identifiers and keys, DNA and protein
# sequences hold about two, and a repeated pattern of two to four letters
# ("abab...", "hahaha") merges no better than its pieces ("ab" * 1000 is 1,000
# tokens in every tokenizer). Charged: each five and each six consonants of one case
# in a row inside a run of at least eight letters of that case (a letter repeated is
# charged as such already), and each letter that repeats the one two, three or four
# before it, three in a row; inside runs of 13 letters or more, also each letter that
# repeats the one five to eight before it twice ("abcde" * 500 is 1,000 tokens in
# cl100k_base and was estimated at 366). Both are near zero in natural text, whose
# words have vowels and whose repeats are words, not pieces: on the token corpus
# the estimate rises 0.35% on the transcripts, 0.8% on base64 and less elsewhere. Known
# undercounts left: random words shorter than eight letters ("qzv xkw ..."), whose
# clusters are as short as words', random base32 shorter than about 1,000
# characters (its digits cut the letter runs; they are charged as digits), random
# lowercase alphanumerics and mixed-case letters shorter than about 400 (by up to
# 12% at 40 characters; measured, not changed by this charge), patterns of more
# than eight letters repeated, and "&", "@" or "^" between a word and a newline
# (no tokenizer merges them: 0.7 of the count, one word a line).
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
_LONG_PERIODS = (5, 6, 7, 8)
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
_MARKS = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_CONTROL = bytes(int((b < 32 and b not in (9, 10, 13)) or b == 127) for b in range(256))
_PUNCTUATION = bytes(int(b in _MARKS or bool(_CONTROL[b])) for b in range(256))
_PER_CONTROL = 0.7
_PER_PUNCTUATION_RUN = 0.5

# Words the tokenizers know. The fitted weights charge a word by its letters, at
# about five a token, as English words cost; a word no tokenizer has in its
# vocabulary costs two tokens or more (Italian, Dutch, Indonesian, Swahili, Tagalog,
# romaji, pinyin, or Finnish, Turkish and Vietnamese without their accents cost
# 1.03-1.8x the fitted estimate; " ikimashita" is four tokens in cl100k_base). A
# word here is a run of one to 31 ASCII letters after a space, lowercase after an
# optional capital, not followed by a letter; it is known when every calibration
# tokenizer encodes it, with its space, as one token (``_known_words.bin``, built by
# ``scripts/build_known_words.py``). Added by hand after the fit: each word not
# known is charged 1.25 tokens and 0.2 a letter past the fourth; a known word's
# letters are not charged as a long run (``b"aaaaaa"``, which the fit put there for
# letters it could not tell from identifiers and keys): it is one token. Every word
# is charged 0.04 more, so that one costs a token at least (a long run of short
# words, "the new plan is good " * 500, was estimated at 0.98 of its count).
_WORD = re.compile(rb" ([A-Za-z][a-z]{0,30})(?![A-Za-z])")
_PER_WORD = 0.04
"""Every word: its two class changes are charged 0.96, and it is one token at least."""
_PER_UNKNOWN_WORD = 1.25
_PER_UNKNOWN_LETTER = 0.2
_UNKNOWN_FREE_LETTERS = 4
_PER_RUN = 0.8
"""The weight of ``b"aaaaaa"`` (each six letters of a run) in ``_ASCII_WEIGHTS``."""
_RUN_LETTERS = 6
_UNKNOWN_COST = tuple(
    _PER_WORD + _PER_UNKNOWN_WORD + _PER_UNKNOWN_LETTER * max(0, size - _UNKNOWN_FREE_LETTERS)
    for size in range(32)
)
"""What a word not known is charged, by its length."""


# Weighted counts of patterns in the class string (non-overlapping, as bytes.count).
_ASCII_WEIGHTS: tuple[tuple[bytes, float], ...] = (
    (b"0", 1.0),  # a digit
    (b"aaaaaa", _PER_RUN),  # each six letters of a run
    (b"\n", 0.27),
    (b"\t", 3.2),  # tab or carriage return
    (b" 0", 1.75),  # a space before a digit is a token of its own
    (b"..", 0.61),  # punctuation pairs: JSON, markup, operators
    (b"  ", 0.04),  # indentation and alignment
    (b"0a", 0.4),  # digit/letter boundaries: hashes, ids, versions
    (b"a0", 0.4),
    (b".a", 1.17),  # punctuation/letter boundaries: paths, identifiers, URLs
    # Added by hand after the fit, where words are short and separators dense (each
    # was charged about 1.5 tokens a word for 2):
    # a newline after a letter is a token of its own (it merges after punctuation,
    # ".\n", and with spaces, " \n", only): one word a line, as ls -1 prints;
    (b"a\n", 1.0),
    (b"a \n", 1.0),
    # a mark after a word and before a space or a newline is a token of its own
    # ("cat, dog, run": ",", " dog", ","; "x;\n");
    (b"a. ", 0.5),
    (b"a.\n", 0.3),
    # two spaces or more after a word are a token before the next word's
    # (columns aligned with spaces); after a newline they are indentation, which
    # the code weights cover.
    (b"a  ", 1.0),
)


def _known_costs() -> tuple[dict[bytes, float], dict[bytes, float], dict[bytes, float]]:
    """Return what each known word after a space is charged, and the credits of the others.

    A word after a space: its share, less its letters' long-run charge. A joined
    word (``"/lib"``): its mark/letter boundary and its letters' long-run charge. A
    bare word (``"name"``): part of its boundary and its letters' long-run charge.
    A known piece is one token; the long-run charge is for letters that are more.
    """
    listed = zlib.decompress(resources.files(__package__).joinpath("_known_words.bin").read_bytes())
    spaced: dict[bytes, float] = {}
    joined: dict[bytes, float] = {}
    bare: dict[bytes, float] = {}
    for piece in listed.split(b"\n"):
        runs = _PER_RUN * (len(piece.lstrip(_MARKS + b" ")) // _RUN_LETTERS)
        if piece[:1] == b" ":
            spaced[piece[1:]] = _PER_WORD - runs
        elif piece[:1].isalpha():
            bare[piece] = _PER_BARE_BOUNDARY + runs
        else:
            joined[piece] = _PER_MARK_LETTER + runs
    return spaced, joined, bare


# Joined and bare words the tokenizers know. Paths, snake_case, file extensions,
# options and calls ("src/rules/core.py", "self._name", "--verbose", "print(value")
# are words joined by marks, and JSON's keys and values are words after a space and
# a mark ('"id": "value", "name"'); the fitted weights charge each mark and word
# about two tokens or more (two class changes, 0.96, and a punctuation/letter
# boundary, 1.17) where a common one is one token in every tokenizer: tool output
# full of paths was charged about 1.8x the costliest tokenizer. A mark followed by
# letters starts a pre-token of its own after a letter, a digit or a newline
# (cl100k_base and its kin split "[^\r\n\p{L}\p{N}]?\p{L}+", DeepSeek
# "[punctuation][A-Za-z]+"): a joined word. After a space, the mark joins it (' "',
# one token in all five for every mark) and the word is a pre-token alone: a bare
# word. After another mark, the marks join ("../", "((."), in as many tokens as
# their pairs may cost, and the word is not credited. Before more letters (ASCII
# or not), neither ends. So there, a joined word that each calibration tokenizer
# encodes as one token (3,539 in ``_known_words.bin``, built by
# ``scripts/build_known_words.py``) is credited its boundary and its letters'
# long-run charge: it costs its class changes, 0.96, as a known word after a space
# does. A known bare word (13,808) is credited its letters' long-run charge and 0.5
# of its boundary: with the space and the mark before it, it costs three class
# changes and the boundary's rest, 2.11, for the two tokens they are. Added by hand
# after the fit, as the known words after a space were; on the token corpus the
# estimate falls from 1.31x to 1.23x the costliest tokenizer on the transcripts
# (median), 1.26x to 1.17x on JSON, 1.35x to 1.25x on code, and the whole corpus
# still bounds all five.
_PER_MARK_LETTER = dict(_ASCII_WEIGHTS)[b".a"]
"""The punctuation/letter boundary's weight, which a known joined word is not charged."""
_PER_BARE_BOUNDARY = 0.5
"""What a known bare word is not charged of its boundary (see above)."""
_KNOWN_COST, _JOINED_CREDIT, _BARE_CREDIT = _known_costs()
"""The known words after a space (``_known_words.bin``) and what each is charged;
the known joined and bare words and what each is credited."""
_MARK = rb"[!-&(-/:-@\[-`{-~]"
"""An ASCII mark other than the apostrophe (which tokenizers split off before ``s``)."""
# The mark is matched first and the lookbehind checked only there (twice as fast
# as a lookbehind tried at every byte).
_WORD_AFTER_MARK = rb"[A-Za-z][a-z]{0,30}(?![A-Za-z\x80-\xff])"
_JOINED = re.compile(_MARK + rb"(?<=[A-Za-z0-9\n]" + _MARK + rb")" + _WORD_AFTER_MARK)
_BARE = re.compile(_MARK + rb"(?<= " + _MARK + rb")(" + _WORD_AFTER_MARK + rb")")


def _credits(data: bytes) -> float:
    """Credit the known joined and bare words that are a pre-token of their own."""
    joined = sum(map(_JOINED_CREDIT.get, _JOINED.findall(data), repeat(0.0)))
    return joined + sum(map(_BARE_CREDIT.get, _BARE.findall(data), repeat(0.0)))


_SCRIPT_WEIGHTS: tuple[tuple[bytes, float], ...] = (
    (b"L", 1.0),
    (b"H", 0.1),
    (b"I", 1.11),
    (b"J", 2.0),
    (b"Z", 0.89),
    (b"W", 1.63),
    (b"F", 2.0),
    (b"E", 3.0),
)

_CHAR_COSTS = zlib.decompress(resources.files(__package__).joinpath("_char_costs.bin").read_bytes())
"""Per BMP code point, the most tokens any calibration tokenizer spends on it alone.

Built by ``scripts/build_char_costs.py``: one byte per code point, 0 for ASCII
(32 for the space, kept as it is), otherwise the cost, 1 to 3 (capped by the UTF-8
length), plus 3 when some tokenizer keeps a space before the character as a token
of its own. Used as a ``str.translate`` table: characters beyond the BMP are past
its end and left as they are."""
_ASTRAL_COST = 4
"""A character beyond the BMP: its UTF-8 length, which no byte-level BPE exceeds."""
_CHAR_MARGIN = 2.0
"""Tokens added to the per-character bound (merges across characters, see the tests)."""
_SPLITS = bytes(
    ord("w")
    if byte == 0x20
    else ord("a")
    if byte < 0x80
    else ord("E")
    if byte >= 0xF0
    else ord("n")
    for byte in range(256)
)
"""Space ``w``, other ASCII ``a``, a lead byte beyond the BMP ``E``, other non-ASCII ``n``."""

_MEMO_BYTES = 32 * 1024 * 1024
"""Memory the memo may hold: its strings (as ``sys.getsizeof`` sizes them) and entries.

Half of it is the young generation. A history whose distinct strings fit in that
half is counted from the memo on every call, however many messages it has (a
10,000-message agent history of about 12 million characters does)."""
_ENTRY_BYTES = 100
"""The memo's own cost per entry (dict slot, int), charged beside the string."""


def _unworded(data: bytes, size: int, cases: bytes, classes: bytes, flags: _Flags) -> float:
    """Charge the letters no word is made of (see ``_PER_PATTERN_LETTER``).

    ``cases`` is ``data.translate(_CASES)``, ``classes`` ``data.translate(_CLASSES)``.
    Byte flags as big integers (see :class:`_Flags`): no Python loop over the text.
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
        in_runs = _Flags.of(long_runs, len(long_runs))
        patterned += _patterned(in_runs, len(long_runs), long=True)
        patterned -= _patterned(in_runs, len(long_runs), long=False)
    return cost + patterned


def _patterned(flags: _Flags, size: int, *, long: bool) -> float:
    """Charge the letters that repeat a pattern, three in a row (not a letter tripled).

    A letter repeats a pattern where it equals the one two, three or four after
    it; with ``long``, also where it equals the one five to eight after it and
    that one the next five to eight after (a longer period must repeat twice:
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


def _unmerged(data: bytes, size: int, classes: bytes, flags: _Flags) -> float:
    """Charge the control characters and the punctuation that does not merge.

    See ``_PER_CONTROL`` and ``_PER_PUNCTUATION_RUN``.
    """
    cost = _PER_CONTROL * data.translate(_CONTROL).count(1)
    if size < 4 or b"...." not in classes:
        return cost
    marks = int.from_bytes(data.translate(_PUNCTUATION), "little")
    runs = marks & (marks << 8) & (marks << 16) & (marks << 24) & ~flags.same
    return cost + _PER_PUNCTUATION_RUN * runs.bit_count()


def _words(data: bytes) -> float:
    """Charge the words after a space: the known ones by name, the others by length.

    See ``_KNOWN_COST``. One lookup a word, at C speed.
    """
    words = _WORD.findall(data)
    by_length = map(_UNKNOWN_COST.__getitem__, map(len, words))
    return sum(map(_KNOWN_COST.get, words, by_length))


class _Flags(NamedTuple):
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
    def of(cls, data: bytes, size: int) -> _Flags:
        whole = int.from_bytes(data, "little")
        before = (whole ^ (whole << 8)).to_bytes(size + 1, "little")[:size]
        same = int.from_bytes(before.translate(_ZERO), "little")
        letters = int.from_bytes(data.translate(_LETTERS), "little")
        return cls(whole, letters, same, same & (same << 8))


def _fitted(data: bytes) -> float:
    """Return the fitted estimate of UTF-8 ``data`` (``data.isascii()`` skips the scripts)."""
    size = len(data)
    classes = data.translate(_CLASSES)
    shifted = int.from_bytes(classes[1:], "little") ^ int.from_bytes(classes[:-1], "little")
    changes = size - 1 - shifted.to_bytes(size - 1, "little").count(0)
    cases = data.translate(_CASES)
    flags = _Flags.of(data, size)
    # A letter equal to the two before it (a NUL is no letter, so the first two
    # bytes never count).
    repeats = (flags.tripled & flags.letters).bit_count()
    cost = (
        _PER_STRING
        + _PER_CLASS_CHANGE * changes
        + _PER_UPPERCASE * cases.count(b"A")
        + _PER_CASE_RISE * cases.count(b"aA")
        + _PER_REPEATED_LETTER * repeats
        + _unworded(data, size, cases, classes, flags)
        + _unmerged(data, size, classes, flags)
        + _words(data)
        - _credits(data)
    )
    for pattern, weight in _ASCII_WEIGHTS:
        cost += weight * classes.count(pattern)
    if not data.isascii():
        for pattern, weight in _SCRIPT_WEIGHTS:
            cost += weight * classes.count(pattern)
    # Errors on short pieces are a few tokens either way and grow like a random
    # walk with length: a square-root margin covers them at no cost on long texts.
    return cost + _MARGIN_PER_SQRT_BYTE * math.sqrt(size)


def _char_bound(text: str, data: bytes) -> float:
    """Bound ``text`` by its ASCII part's estimate plus each other character's worst cost.

    One ``str.translate`` maps every BMP character to its table byte (ASCII to 0,
    the space to itself); characters beyond the BMP, which the table leaves as they
    are, cost :data:`_ASTRAL_COST` each. Dropping the other characters joins the
    ASCII around them, so each place where they split it costs a token more: after
    ASCII other than a space (``"a中b"`` is three tokens, ``"ab"`` one), after two
    spaces, and after one space when the character does not take a space in.
    """
    costs = text.translate(_CHAR_COSTS)
    counts = [costs.count(chr(value)) for value in range(1, 7)]
    astral = len(text) - costs.count("\x00") - costs.count(" ") - sum(counts)
    ascii_part = text.encode("ascii", "ignore")
    cost = _fitted(ascii_part) if ascii_part else 0.0
    cost += sum(((value - 1) % 3 + 1) * n for value, n in enumerate(counts, 1))
    cost += costs.count(" \x04") + costs.count(" \x05") + costs.count(" \x06")
    splits = data.translate(_SPLITS)
    cost += splits.count(b"an") + splits.count(b"wwn")
    if astral:
        cost += _ASTRAL_COST * astral + splits.count(b"aE") + splits.count(b"wE")
        cost += splits.count(b"wwE")
    return cost + _CHAR_MARGIN


def _estimate(text: str) -> int:
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    cost = _fitted(data)
    if size == len(text):  # ASCII
        return min(math.ceil(cost), size)
    tokens = min(math.ceil(max(cost, _char_bound(text, data))), size)
    if not unicodedata.is_normalized("NFC", text):
        # Qwen tokenizes the NFC form, which can be longer (U+0F76 is three bytes
        # and becomes six, U+1D160 four bytes and becomes twelve): bound it too.
        tokens = max(tokens, _estimate(unicodedata.normalize("NFC", text)))
    return tokens


_Key = TypeVar("_Key", bound=Hashable)


class Memo(dict[_Key, int]):
    """Estimates by key (a string), bounded in bytes: two generations of plain dicts.

    The memo itself is the young generation, so a hit is one C-level dict lookup
    (``memo[text]``; :meth:`__missing__` runs only on a miss). New entries go to the
    young generation; when it holds half the budget it becomes the old one (and the
    previous old one is dropped). A miss that finds its string in the old generation
    moves it back to the young one, so every string asked for again within half the
    budget stays, without reordering anything on a hit (unlike an LRU list).
    Thread-safe: hits read a dict; misses update the generations under a lock.
    """

    def __init__(
        self,
        estimate: Callable[[_Key], int],
        budget: int,
        sizeof: Callable[[_Key], int] = sys.getsizeof,
    ) -> None:
        """Memoise ``estimate`` in at most ``budget`` bytes (keys as ``sizeof`` sizes them).

        A key must determine the estimate: equal keys, equal estimates.
        """
        super().__init__()
        self._estimate = estimate
        self._sizeof = sizeof
        self._half = budget // 2
        self._old: dict[_Key, int] = {}
        self._young_bytes = 0
        self._lock = threading.Lock()

    def __missing__(self, key: _Key) -> int:
        """Find ``key`` in the old generation or estimate it; remember it as young."""
        tokens = self._old.get(key)
        if tokens is None:
            tokens = self._estimate(key)
        size = self._sizeof(key) + _ENTRY_BYTES
        if size > self._half:
            return tokens  # larger than a generation: never held
        with self._lock:
            if key not in self:
                self._old.pop(key, None)
                if self._young_bytes + size > self._half:
                    self._old = dict(self)
                    self.clear()
                    self._young_bytes = 0
                self[key] = tokens
                self._young_bytes += size
        return tokens

    def cache_clear(self) -> None:
        """Forget every estimate."""
        with self._lock:
            self.clear()
            self._old = {}
            self._young_bytes = 0

    @property
    def held(self) -> int:
        """Return how many keys are held (both generations)."""
        return len(self) + len(self._old)


_estimate_memo: Memo[str] = Memo(_estimate, _MEMO_BYTES)


def text_tokens(text: str) -> int:
    """Return an upper-bound estimate of the tokens of ``text``.

    Charges CJK, other scripts, emoji, digits, punctuation and long unbroken runs
    (base64, hashes, minified code) by what they cost in real tokenizers, and never
    counts fewer tokens than cl100k_base, o200k_base, Llama 3, Qwen 3 or DeepSeek
    did on the project's calibration corpus, nor on strings of random characters
    of any script (each character charged at least what it costs alone). English
    prose costs about 1.2x cl100k_base, source code about 1.4x.

    Args:
        text: Any string.

    Returns:
        The estimated token count: 0 for the empty string, otherwise at least 1
        and at most the length of ``text`` in UTF-8 bytes.

    Example:
        >>> text_tokens("")
        0
        >>> text_tokens("你好") >= 2
        True
    """
    if not text:
        return 0
    return _estimate_memo[text]
