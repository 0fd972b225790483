"""Build ``langchain_context_pipeline/tokens/_known_words.bin``: words every tokenizer knows.

Run ``python scripts/build_known_words.py`` from the repository root (needs the dev
extra, as ``build_char_costs.py`` does). A word is a run of one to 31 ASCII letters,
lowercase after an optional capital. The list holds three kinds of piece, each as
the tokenizers see it, that each of cl100k_base, o200k_base, Llama 3, Qwen 3 and
DeepSeek encodes as one token:

* a word after a space (``" the"``, ``" Server"``);
* a joined word: an ASCII mark other than the apostrophe, then a word (``"/lib"``,
  ``"_name"``, ``".py"``, ``"-based"``);
* a bare word (``"name"``, ``"value"``).

The candidates are the tokens of cl100k_base's vocabulary of those shapes. The
estimate charges a word after a space that is not known as the two tokens or more
it costs (other languages written in ASCII, rare and made-up words), and does not
charge a known word's letters as a long run; nor, where a known joined or bare word
is a pre-token of its own (a joined word after a letter, a digit or a newline; a
bare word after a mark that follows a space or another mark, as JSON's ``"key"``),
its punctuation/letter boundary in full. The file is the sorted pieces, one a line,
zlib-compressed; it is read once at import by
:mod:`langchain_context_pipeline.tokens.known_words`, which tells the kinds apart by
their first byte.

Run it again when a tokenizer is added to the calibration set.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from build_char_costs import tokenizers

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "langchain_context_pipeline" / "tokens" / "_known_words.bin"
SHAPE = re.compile(rb" ?[A-Za-z][a-z]{0,30}")
"""A word as the estimate finds it (``known_words._WORD``, ``known_words._BARE``), with its
space or bare."""
JOINED_SHAPE = re.compile(rb"[!-&(-/:-@\[-`{-~][A-Za-z][a-z]{0,30}")
"""A joined word as the estimate finds it (``known_words._JOINED``): a mark, not ``'``
(which the tokenizers split off before ``s``, ``t``, ``re``, ...), then a word."""


def build() -> list[bytes]:
    """Return the known pieces (words after a space, joined words, bare words), sorted."""
    import quicktok  # type: ignore[import-untyped, unused-ignore]

    vocabulary = quicktok.get_encoding("cl100k_base")
    candidates = set()
    for token in range(vocabulary.n_vocab):
        try:
            piece = vocabulary.decode_single_token_bytes(token)
        except (KeyError, ValueError):  # ids with no token
            continue
        if SHAPE.fullmatch(piece) or JOINED_SHAPE.fullmatch(piece):
            candidates.add(piece)
    counters = tokenizers()
    return sorted(
        piece
        for piece in candidates
        if all(count(piece.decode("ascii")) == 1 for count in counters)
    )


def main() -> None:
    """Write the list and say how many words it holds."""
    pieces = build()
    OUT.write_bytes(zlib.compress(b"\n".join(pieces), 9))
    spaced = sum(1 for piece in pieces if piece[:1] == b" ")
    bare = sum(1 for piece in pieces if piece[:1].isalpha())
    print(
        f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes): {spaced} words "
        f"after a space, {len(pieces) - spaced - bare} joined words, {bare} bare words"
    )


if __name__ == "__main__":
    main()
