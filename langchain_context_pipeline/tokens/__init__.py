"""Token counting: the default estimate, the ``TokenCounter`` contract and adapters.

The counters live in :mod:`~langchain_context_pipeline.tokens.counters`; the estimate
in :mod:`~langchain_context_pipeline.tokens.estimate`; the provider's reported usage
in :mod:`~langchain_context_pipeline.tokens.calibration`.
"""

from langchain_context_pipeline.tokens.counters import *  # noqa: F403
from langchain_context_pipeline.tokens.counters import __all__ as __all__
