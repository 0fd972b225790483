"""The ``recall`` tool: the agent reads back what compaction replaced.

The public path of :mod:`langchain_context_pipeline.integrations.recall`.
"""

from langchain_context_pipeline.integrations.recall import (
    DEFAULT_PAGE_CHARS,
    MAX_PAGE_CHARS,
    RECALL_DESCRIPTION,
    aarchive_originals,
    archive_originals,
    create_recall_tool,
)

__all__ = [
    "DEFAULT_PAGE_CHARS",
    "MAX_PAGE_CHARS",
    "RECALL_DESCRIPTION",
    "aarchive_originals",
    "archive_originals",
    "create_recall_tool",
]
