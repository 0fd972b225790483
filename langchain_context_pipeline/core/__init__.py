"""The one planner behind every entry point: settings, the pipeline, its report.

:class:`~langchain_context_pipeline.core.pipeline.ContextPipeline` plans a pass as a
sans-IO generator; sync and async drivers differ only in the summarizer call.
"""
