"""The one planner behind every entry point: the pass, the pipeline, its report.

:class:`~langchain_context_pipeline.core.pipeline.ContextPipeline` plans a pass as a
sans-IO generator (``planner.py``); sync and async drivers differ only in the
summarizer call.
"""
