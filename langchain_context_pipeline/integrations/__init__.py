"""Where users plug the pipeline in, and what those entry points share.

The LangGraph hook, the create_agent middleware, deepagents and the recall tool,
with their events, stream, cache hints and archive. The public paths are the
top-level modules (``langchain_context_pipeline.langgraph``, ``.middleware``,
``.deepagents``, ``.recall``); they re-export these.
"""
