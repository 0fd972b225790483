"""LangChain v1 entry point: an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

The public path of :mod:`langchain_context_pipeline.integrations.middleware`.
"""

from langchain_context_pipeline.integrations.middleware import *  # noqa: F403
from langchain_context_pipeline.integrations.middleware import __all__ as __all__
