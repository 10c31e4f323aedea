"""The Hungarian algorithm behind ``order: unordered`` is exactly optimal."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolscore.scorer.assignment import max_weight_assignment

weights = st.integers(0, 5).flatmap(
    lambda rows: st.integers(0, 5).flatmap(
        lambda cols: st.lists(
            st.lists(
                st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 1.0]), min_size=cols, max_size=cols
            ),
            min_size=rows,
            max_size=rows,
        )
    )
)


def brute_force(matrix: list[list[float]]) -> float:
    rows = len(matrix)
    cols = len(matrix[0]) if rows else 0
    if not rows or not cols:
        return 0.0
    if rows <= cols:
        return max(
            sum(matrix[r][c] for r, c in enumerate(perm))
            for perm in itertools.permutations(range(cols), rows)
        )
    return max(
        sum(matrix[r][c] for c, r in enumerate(perm))
        for perm in itertools.permutations(range(rows), cols)
    )


@settings(max_examples=300, deadline=None)
@given(weights)
def test_total_equals_brute_force_and_pairs_are_a_matching(matrix):
    pairs = max_weight_assignment(matrix)
    rows = len(matrix)
    cols = len(matrix[0]) if rows else 0
    assert len(pairs) == min(rows, cols)
    assert len({r for r, _ in pairs}) == len(pairs) == len({c for _, c in pairs})
    assert sum(matrix[r][c] for r, c in pairs) == pytest.approx(brute_force(matrix), abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(weights)
def test_agrees_with_scipy(matrix):
    optimize = pytest.importorskip("scipy.optimize")
    import numpy as np

    if not matrix or not matrix[0]:
        return
    rows, cols = optimize.linear_sum_assignment(np.array(matrix), maximize=True)
    ours = sum(matrix[r][c] for r, c in max_weight_assignment(matrix))
    assert ours == pytest.approx(float(np.array(matrix)[rows, cols].sum()), abs=1e-9)
