"""The ``context-pipeline`` command line and the transcript files it reads and writes.

The core package never imports this one: it depends on the core, not the other way
round. :func:`main` is the console script; the transcript reader and writer are in
:mod:`langchain_context_pipeline.cli.transcripts`.
"""

from langchain_context_pipeline.cli.app import main

__all__ = ["main"]
