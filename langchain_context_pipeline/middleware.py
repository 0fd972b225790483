"""LangChain v1 entry point: an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

The public path of :mod:`langchain_context_pipeline.integrations.middleware`.
"""

from langchain_context_pipeline.integrations.middleware import (
    SUMMARY_STATE_KEY,
    ContextPipelineAgentState,
    ContextPipelineMiddleware,
)

__all__ = [
    "SUMMARY_STATE_KEY",
    "ContextPipelineAgentState",
    "ContextPipelineMiddleware",
]
