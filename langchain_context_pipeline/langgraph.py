"""LangGraph entry point: a pre-model hook that keeps every model call under budget.

The public path of :mod:`langchain_context_pipeline.integrations.langgraph`.
"""

from langchain_context_pipeline.integrations.langgraph import *  # noqa: F403
from langchain_context_pipeline.integrations.langgraph import __all__ as __all__
