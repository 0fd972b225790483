"""LangGraph entry point: a pre-model hook that keeps every model call under budget.

The public path of :mod:`langchain_context_pipeline.integrations.langgraph`.
"""

from langchain_context_pipeline.integrations.langgraph import (
    DEFAULT_SUMMARY_KEY,
    ContextPipelineHook,
    ContextPipelineState,
    HookMode,
    Threshold,
    create_pre_model_hook,
    resolve_threshold,
)

__all__ = [
    "DEFAULT_SUMMARY_KEY",
    "ContextPipelineHook",
    "ContextPipelineState",
    "HookMode",
    "Threshold",
    "create_pre_model_hook",
    "resolve_threshold",
]
