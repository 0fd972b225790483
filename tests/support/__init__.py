"""Helpers the tests share: fake models, invariants, hypothesis strategies, builders.

Imported as ``from tests.support.fakes import ...``; pytest puts the repository root
on ``sys.path`` because ``tests/`` is a package (rootdir-based module names).
"""
