"""The ``recall`` tool: the agent reads back what compaction replaced.

The public path of :mod:`langchain_context_pipeline.integrations.recall`.
"""

from langchain_context_pipeline.integrations.recall import *  # noqa: F403
from langchain_context_pipeline.integrations.recall import __all__ as __all__
