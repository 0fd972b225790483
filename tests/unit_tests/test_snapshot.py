"""Snapshots tell two values apart exactly when they would be sent differently."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from langchain_context_pipeline.messages.snapshot import snapshot
from tests.support.written import PLAIN_LEAVES, nested, typed

values = nested(st.sampled_from(PLAIN_LEAVES))


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
