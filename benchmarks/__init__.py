"""Side-by-side benchmarks of the pipeline and its peers on real agent transcripts.

Run ``python -m benchmarks.run`` (full) or ``python -m benchmarks.run --quick``.
"""
