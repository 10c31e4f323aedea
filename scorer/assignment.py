"""Optimal assignment (maximum total weight) for small rectangular matrices.

A pure-Python Hungarian algorithm (Kuhn-Munkres with potentials, O(n² m)). Tool-call lists are
short (rarely more than a few dozen calls), so this is exact and fast enough, and it spares the
runtime a dependency on SciPy (tens of megabytes) for one function. Tests check it against brute
force over all permutations and against ``scipy.optimize.linear_sum_assignment`` when available.
"""

from __future__ import annotations

from collections.abc import Sequence

_INF = float("inf")


def max_weight_assignment(weights: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """Pairs ``(row, column)`` maximising the summed weight; every row or every column is used.

    ``weights`` is ``rows × columns`` (either may be larger). Returns pairs sorted by row.
    """
    rows = len(weights)
    cols = len(weights[0]) if rows else 0
    if rows == 0 or cols == 0:
        return []
    if rows > cols:
        transposed = [[weights[r][c] for r in range(rows)] for c in range(cols)]
        return sorted((r, c) for c, r in max_weight_assignment(transposed))
    # Minimise cost = -weight; rows <= cols. 1-based arrays as in the classic formulation.
    u = [0.0] * (rows + 1)
    v = [0.0] * (cols + 1)
    owner = [0] * (cols + 1)  # owner[c] = row assigned to column c (0 = none)
    way = [0] * (cols + 1)
    for row in range(1, rows + 1):
        owner[0] = row
        col0 = _free_column(weights, u, v, owner, way)
        while True:  # flip the alternating path back to the row just added
            col1 = way[col0]
            owner[col0] = owner[col1]
            col0 = col1
            if col0 == 0:
                break
    return sorted((owner[c] - 1, c - 1) for c in range(1, cols + 1) if owner[c] != 0)


def _free_column(
    weights: Sequence[Sequence[float]],
    u: list[float],
    v: list[float],
    owner: list[int],
    way: list[int],
) -> int:
    """Grow the shortest alternating path from ``owner[0]`` to a free column, updating the
    potentials ``u``/``v`` and the back links ``way``; returns that column."""
    cols = len(v) - 1
    col0 = 0
    minv = [_INF] * (cols + 1)
    used = [False] * (cols + 1)
    while True:
        used[col0] = True
        r0 = owner[col0]
        delta = _INF
        col1 = 0
        weights_r0 = weights[r0 - 1]
        u_r0 = u[r0]
        for c in range(1, cols + 1):
            if not used[c]:
                cur = -weights_r0[c - 1] - u_r0 - v[c]
                if cur < minv[c]:
                    minv[c] = cur
                    way[c] = col0
                if minv[c] < delta:
                    delta = minv[c]
                    col1 = c
        for c in range(cols + 1):
            if used[c]:
                u[owner[c]] += delta
                v[c] -= delta
            else:
                minv[c] -= delta
        col0 = col1
        if owner[col0] == 0:
            return col0
