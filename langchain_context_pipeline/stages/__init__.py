"""The three stages, cheapest first: prune, condense, truncate (and what they carry).

Each stage reads the parsed messages of :mod:`langchain_context_pipeline.messages`
and measures with the counters of :mod:`langchain_context_pipeline.tokens`.
"""
