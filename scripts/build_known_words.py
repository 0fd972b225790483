"""Build ``langchain_context_pipeline/tokens/_known_words.bin``: words every tokenizer knows.

Run ``python scripts/build_known_words.py`` from the repository root (needs the dev
extra, as ``build_char_costs.py`` does). A known word is a run of one to 31 ASCII
letters, lowercase after an optional capital, that each of cl100k_base,
o200k_base, Llama 3, Qwen 3 and DeepSeek encodes after a space as one token
(``" the"``, ``" Server"``). A known joined word is an ASCII mark other than the
apostrophe followed by such a run, that each of them encodes as one token
(``"/usr"``, ``"_name"``, ``".py"``, ``"-based"``). The candidates are the tokens of
cl100k_base's vocabulary of those shapes. The estimate charges a word after a
space that is not among them as the two tokens or more it costs (other languages
written in ASCII, rare and made-up words), and does not charge a known word's
letters as a long run, nor a known joined word's mark/letter boundary where it
starts a pre-token of its own (after a letter, a digit or a newline: paths,
snake_case, file extensions). The file is the sorted words and joined words, one
a line, zlib-compressed; it is read once at import by
:mod:`langchain_context_pipeline.tokens.estimate`, which tells them apart by their
first byte.

Run it again when a tokenizer is added to the calibration set.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from build_char_costs import tokenizers

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "langchain_context_pipeline" / "tokens" / "_known_words.bin"
SHAPE = re.compile(rb" [A-Za-z][a-z]{0,30}")
"""A word as the estimate finds it (``estimate._WORD``), with its space."""
JOINED_SHAPE = re.compile(rb"[!-&(-/:-@\[-`{-~][A-Za-z][a-z]{0,30}")
"""A joined word as the estimate finds it (``estimate._JOINED``): a mark, not ``'``
(which the tokenizers split off before ``s``, ``t``, ``re``, ...), then a word."""


def build() -> list[bytes]:
    """Return the known words (without their space) and joined words, sorted."""
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
        piece[1:] if piece[:1] == b" " else piece
        for piece in candidates
        if all(count(piece.decode("ascii")) == 1 for count in counters)
    )


def main() -> None:
    """Write the list and say how many words it holds."""
    words = build()
    OUT.write_bytes(zlib.compress(b"\n".join(words), 9))
    joined = sum(1 for word in words if not word[:1].isalpha())
    print(
        f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes): "
        f"{len(words) - joined} words, {joined} joined words"
    )


if __name__ == "__main__":
    main()
