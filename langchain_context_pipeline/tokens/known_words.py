"""Words and word pieces every tokenizer knows: the estimate's charges and credits for them.

The fit of :mod:`langchain_context_pipeline.tokens.estimate` charges letters by
runs and marks by boundaries. A word, a mark joined to a word, or a bare word that
each calibration tokenizer encodes as one token (``_known_words.bin``, built by
``scripts/build_known_words.py``) costs one token where it is a pre-token of its
own; a word after a space that none of them knows costs two or more. Each is found
by one regular expression and looked up in one dict, at C speed.
"""

from __future__ import annotations

import re
import zlib
from importlib import resources
from itertools import repeat

from langchain_context_pipeline.tokens.irregular import MARKS

__all__ = ["KNOWN_WORDS", "PER_MARK_LETTER", "PER_RUN", "credits", "words"]

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
PER_RUN = 0.8
"""The weight of ``b"aaaaaa"`` (each six letters of a run) in the estimate's fitted table."""
RUN_LETTERS = 6
_UNKNOWN_COST = tuple(
    _PER_WORD + _PER_UNKNOWN_WORD + _PER_UNKNOWN_LETTER * max(0, size - _UNKNOWN_FREE_LETTERS)
    for size in range(32)
)
"""What a word not known is charged, by its length."""


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
        runs = PER_RUN * (len(piece.lstrip(MARKS + b" ")) // RUN_LETTERS)
        if piece[:1] == b" ":
            spaced[piece[1:]] = _PER_WORD - runs
        elif piece[:1].isalpha():
            bare[piece] = _PER_BARE_BOUNDARY + runs
        else:
            joined[piece] = PER_MARK_LETTER + runs
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
PER_MARK_LETTER = 1.17
"""The weight of ``b".a"`` (a punctuation/letter boundary) in the estimate's fitted
table, which a known joined word is not charged."""
_PER_BARE_BOUNDARY = 0.5
"""What a known bare word is not charged of its boundary (see above)."""
_KNOWN_COST, _JOINED_CREDIT, _BARE_CREDIT = _known_costs()
"""The known words after a space (``_known_words.bin``) and what each is charged;
the known joined and bare words and what each is credited."""
KNOWN_WORDS = _KNOWN_COST
"""The words every calibration tokenizer encodes, after a space, as one token (as
``_known_words.bin`` lists them, without the space): look a word up with ``in``."""
_MARK = rb"[!-&(-/:-@\[-`{-~]"
"""An ASCII mark other than the apostrophe (which tokenizers split off before ``s``)."""
# The mark is matched first and the lookbehind checked only there (twice as fast
# as a lookbehind tried at every byte).
_WORD_AFTER_MARK = rb"[A-Za-z][a-z]{0,30}(?![A-Za-z\x80-\xff])"
_JOINED = re.compile(_MARK + rb"(?<=[A-Za-z0-9\n]" + _MARK + rb")" + _WORD_AFTER_MARK)
_BARE = re.compile(_MARK + rb"(?<= " + _MARK + rb")(" + _WORD_AFTER_MARK + rb")")


def credits(data: bytes) -> float:
    """Credit the known joined and bare words that are a pre-token of their own."""
    joined = sum(map(_JOINED_CREDIT.get, _JOINED.findall(data), repeat(0.0)))
    return joined + sum(map(_BARE_CREDIT.get, _BARE.findall(data), repeat(0.0)))


def words(data: bytes) -> float:
    """Charge the words after a space: the known ones by name, the others by length.

    See ``_KNOWN_COST``. One lookup a word, at C speed.
    """
    found = _WORD.findall(data)
    by_length = map(_UNKNOWN_COST.__getitem__, map(len, found))
    return sum(map(_KNOWN_COST.get, found, by_length))
