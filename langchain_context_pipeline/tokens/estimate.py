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
  to four ("abab..."), or of five to sixteen twice in a row inside long letter
  runs ("abcdeabcde..."), near zero in natural text;
* punctuation that does not merge (added by hand too): control characters,
  marks that end four marks in a row and differ from the one before ("()()",
  random marks; "----" stays free), and runs of the eleven marks that some
  tokenizer merges in pairs at best ("[[[[", "&&&&": a token per two);
* where words are short and separators dense (added by hand too): a newline after
  a letter, a mark between a word and a space or a newline, two spaces after a
  word or a mark, each about the token it is;
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

The charges for what no word is made of and for punctuation that does not merge
are in :mod:`~langchain_context_pipeline.tokens.irregular`, those for the words and
word pieces the tokenizers know in :mod:`~langchain_context_pipeline.tokens.known_words`;
this module holds the fit and puts them together.

The weights were fitted by linear programming so that the estimate is at least
the count of each of cl100k_base, o200k_base, Llama 3, Qwen 3 and DeepSeek on
every sample of ``tests/data/token_corpus`` and on pieces of them, while keeping
English prose and code as close to cl100k_base as these features allow; then
rounded up. The result is capped at the UTF-8 length, which no byte-level BPE
tokenizer can exceed (every token is at least one byte).

Repetition. The fit bounds whole samples, where the estimate's error on one kind
of line (over on some, under on others) averages out, and the square-root margin
assumes errors that add up like a random walk. A line repeated many times repeats
its own error instead (of 600 lines of the corpus, each repeated 60 times, 42 were
estimated under the costliest tokenizer, at worst 0.69 of its count, ``"gcrs.py"``),
and so does a line repeated with a counter, a timestamp or a figure that changes,
or with its newline escaped in a JSON string (a file's content in a tool call), and
so do the items of a list written on one line (``item_0, item_1, ...``), a unit
repeated with spaces between its copies (``DONE DONE ...``) and an ASCII unit
repeated with no break (``"src/app.py" * 3000``). So a text whose repeated lines
(compared with their digits taken out, and ending at a newline, an escaped one, a
comma, a semicolon or a space) make half of it, or that is one such unit repeated
(or holds stretches of such copies that make half of it: after a preamble, cut in
the middle by truncation), is also charged copy by copy, each copy a share of a few
copies' estimate (:mod:`~langchain_context_pipeline.tokens.repeated`), and the
estimate is the larger of the two. Left: a unit repeated with no break with runs
of spaces inside it, and copies that make less than half of a text (up to almost
half under; see
:mod:`~langchain_context_pipeline.tokens.repeated` and
:mod:`~langchain_context_pipeline.tokens.irregular`).

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
import unicodedata
import zlib
from importlib import resources

from langchain_context_pipeline.tokens.irregular import Flags, unmerged, unworded
from langchain_context_pipeline.tokens.known_words import PER_MARK_LETTER, PER_RUN, credits, words
from langchain_context_pipeline.tokens.memo import Memo
from langchain_context_pipeline.tokens.repeated import repeated_bound

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

# Weighted counts of patterns in the class string (non-overlapping, as bytes.count).
_ASCII_WEIGHTS: tuple[tuple[bytes, float], ...] = (
    (b"0", 1.0),  # a digit
    (b"aaaaaa", PER_RUN),  # each six letters of a run
    (b"\n", 0.27),
    (b"\t", 3.2),  # tab or carriage return
    (b" 0", 1.75),  # a space before a digit is a token of its own
    (b"..", 0.61),  # punctuation pairs: JSON, markup, operators
    (b"  ", 0.04),  # indentation and alignment
    (b"0a", 0.4),  # digit/letter boundaries: hashes, ids, versions
    (b"a0", 0.4),
    (b".a", PER_MARK_LETTER),  # punctuation/letter boundaries: paths, identifiers, URLs
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
    # and after a mark ("-  -  -", " }  } ": " -", " " per copy; was charged about one
    # token a copy, half the count).
    (b".  ", 1.0),
)

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


def _fitted(data: bytes) -> float:
    """Return the fitted estimate of UTF-8 ``data`` (``data.isascii()`` skips the scripts)."""
    size = len(data)
    classes = data.translate(_CLASSES)
    shifted = int.from_bytes(classes[1:], "little") ^ int.from_bytes(classes[:-1], "little")
    changes = size - 1 - shifted.to_bytes(size - 1, "little").count(0)
    cases = data.translate(_CASES)
    flags = Flags.of(data, size)
    # A letter equal to the two before it (a NUL is no letter, so the first two
    # bytes never count).
    repeats = (flags.tripled & flags.letters).bit_count()
    cost = (
        _PER_STRING
        + _PER_CLASS_CHANGE * changes
        + _PER_UPPERCASE * cases.count(b"A")
        + _PER_CASE_RISE * cases.count(b"aA")
        + _PER_REPEATED_LETTER * repeats
        + unworded(data, size, cases, classes, flags)
        + unmerged(data, size, classes, flags)
        + words(data)
        - credits(data)
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


def _fitted_tokens(text: str) -> int:
    """Return the fitted estimate of ``text`` (and the per-character bound, if not ASCII)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    cost = _fitted(data)
    if size == len(text):  # ASCII
        return min(math.ceil(cost), size)
    tokens = min(math.ceil(max(cost, _char_bound(text, data))), size)
    if not unicodedata.is_normalized("NFC", text):
        # Qwen tokenizes the NFC form, which can be longer (U+0F76 is three bytes
        # and becomes six, U+1D160 four bytes and becomes twelve): bound it too.
        tokens = max(tokens, _fitted_tokens(unicodedata.normalize("NFC", text)))
    return tokens


def _estimate(text: str) -> int:
    # Text that repeats its lines is also charged copy by copy, capped at the UTF-8
    # length as the fit is (unless the NFC form costs more): a fit at the cap already
    # (dense digits) is the estimate, and the lines are not read.
    fitted = _fitted_tokens(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    if fitted >= size:
        return fitted
    return max(fitted, min(repeated_bound(text, _fitted_tokens), size))


_estimate_memo: Memo[str, int] = Memo(_estimate, _MEMO_BYTES)


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
