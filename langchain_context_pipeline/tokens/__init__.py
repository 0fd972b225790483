"""Token counting: the default estimate, the ``TokenCounter`` contract and adapters.

The counters live in :mod:`~langchain_context_pipeline.tokens.counters`; the estimate
in :mod:`~langchain_context_pipeline.tokens.estimate`; the provider's reported usage
in :mod:`~langchain_context_pipeline.tokens.calibration`.
"""

from langchain_context_pipeline.tokens.counters import (
    FILE_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounter,
    count_images,
    countable_parts,
    estimate_message_tokens,
    estimate_tokens,
    message_text,
    model_token_counter,
    resolve_token_counter,
    tiktoken_counter,
)

__all__ = [
    "FILE_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounter",
    "count_images",
    "countable_parts",
    "estimate_message_tokens",
    "estimate_tokens",
    "message_text",
    "model_token_counter",
    "resolve_token_counter",
    "tiktoken_counter",
]
