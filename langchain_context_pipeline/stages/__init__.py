"""The three stages, cheapest first: prune, condense, truncate, and what they share.

Their settings, stats, the summarizer call and the Runnable base live here too.

Each stage reads the parsed messages of :mod:`langchain_context_pipeline.messages`
and measures with the counters of :mod:`langchain_context_pipeline.tokens`.
"""
