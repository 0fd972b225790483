"""Values that are often equal under ``==`` yet written differently, and how they are written.

Shared by the tests of the snapshots and of the memos' fast check: both must tell two
values apart exactly when a provider would be sent them differently.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

PLAIN_LEAVES = [None, False, True, 0, 1, 0.0, -0.0, 1.0, float("nan"), "a", "", b"a"]
"""Few leaves, so that two draws are often equal under ``==`` yet written differently."""


def nested(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists, tuples and dicts (string and int keys) of ``leaves``, a few deep."""
    keys = st.sampled_from(["a", "b", "c"]) | st.integers(0, 1)
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(keys, inner, max_size=3)
        ),
        max_leaves=8,
    )


def typed(value: Any) -> Any:
    """The value with every container's kind and order, and every leaf's type and repr."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    return (type(value).__name__, repr(value))
