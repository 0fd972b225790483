"""deepagents entry point: the pipeline as a deep agent's context manager.

The public path of :mod:`langchain_context_pipeline.integrations.deepagents`.
"""

from langchain_context_pipeline.integrations.deepagents import *  # noqa: F403
from langchain_context_pipeline.integrations.deepagents import __all__ as __all__
