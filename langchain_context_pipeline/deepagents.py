"""deepagents entry point: the pipeline as a deep agent's context manager.

The public path of :mod:`langchain_context_pipeline.integrations.deepagents`.
"""

from langchain_context_pipeline.integrations.deepagents import (
    SUMMARIZATION_SLOT,
    DeepAgentContextMiddleware,
    create_deep_agent,
    with_context_pipeline,
)

__all__ = [
    "SUMMARIZATION_SLOT",
    "DeepAgentContextMiddleware",
    "create_deep_agent",
    "with_context_pipeline",
]
