"""Snapshots tell two values apart exactly when they would be sent differently."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from langchain_context_pipeline.messages.snapshot import snapshot

# Few values, so that two draws are often equal under == yet written differently.
leaves = st.sampled_from([None, False, True, 0, 1, 0.0, -0.0, 1.0, float("nan"), "a", "", b"a"])
keys = st.sampled_from(["a", "b", "c"]) | st.integers(0, 1)
values = st.recursive(
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


@given(values, values)
@example(1, True)
@example(0.0, -0.0)
@example({"a": 1, "b": 2}, {"b": 2, "a": 1})
@example({"a": [1]}, {"a": (1,)})
def test_snapshots_are_equal_exactly_when_the_values_are_written_alike(x: Any, y: Any) -> None:
    assert (snapshot(x) == snapshot(y)) == (typed(x) == typed(y))


@given(values)
def test_a_value_equals_its_own_snapshot_and_a_copy_of_it(x: Any) -> None:
    import copy

    assert snapshot(x) == snapshot(x) == snapshot(copy.deepcopy(x))
