"""Measure what references add to compressed requests of the real transcripts.

    PYTHONPATH=. python scripts/reference_overhead.py [threshold ...]

For every transcript in ``tests/data/transcripts``, the pipeline (digest summaries)
compresses the whole history once at each threshold; the tokens the references
take (the output minus the same output with every reference removed) are reported
as a share of the compressed request, by the default estimate, by a worst case of
10 tokens per reference, and by tiktoken's ``o200k_base`` when it is available offline.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from langchain_context_pipeline import DIGEST, ContextPipeline
from langchain_context_pipeline.cli.transcripts import load_transcript
from langchain_context_pipeline.tokens.counters import estimate_tokens, message_text

_REF = re.compile(r"\nOriginals: ref=[0-9a-f.]+| \(ref=[0-9a-f.]+\)| ref=[0-9a-f.]+")


def _texts(messages: list) -> list[str]:
    return [message_text(m) for m in messages]


def main(thresholds: list[int]) -> None:
    """Print the references' share of the compressed requests at each threshold."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
    except Exception:  # no network: the estimate only
        encoding = None
    paths = sorted(Path("tests/data/transcripts").glob("*.json"))
    for threshold in thresholds:
        total = refs = total_tk = refs_tk = count = 0
        for path in paths:
            messages = load_transcript(path)[0]
            out = ContextPipeline(threshold=threshold, model=DIGEST).invoke(messages)
            stripped = [
                m.model_copy(update={"content": _REF.sub("", message_text(m))})
                if _REF.search(message_text(m))
                else m
                for m in out
            ]
            total += estimate_tokens(out)
            count += sum(len(_REF.findall(message_text(m))) for m in out)
            refs += estimate_tokens(out) - estimate_tokens(stripped)
            if encoding is not None:
                a = sum(len(encoding.encode(t)) for t in _texts(out))
                b = sum(len(encoding.encode(t)) for t in _texts(stripped))
                total_tk += a
                refs_tk += a - b
        line = f"threshold {threshold}: {count} references, {refs} of {total} tokens"
        line += f" ({refs / total:.2%})"
        # A tokenizer splits hex badly: at most 10 tokens a reference is the worst case.
        line += f"; at 10 tokens each: {count * 10 / total:.2%}"
        if encoding is not None:
            line += f"; o200k: {refs_tk} of {total_tk} ({refs_tk / total_tk:.2%})"
        print(line, f"over {len(paths)} transcripts")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [16000, 32000])
