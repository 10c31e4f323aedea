"""``toolscore show``: where each metric's lost points went, from ``details.losses``.

The labels are ``scorer/losses.py``'s (docs/scoring.md, "Where the points went"): one per call
without a partner and one per argument that scored below 1, with the points of the score each
accounts for. They are printed as a table under the metric's explanation, the calls numbered as
the tool-call table numbers them (1-based; a predicted position counted after ``duplicates:
collapse`` is mapped back to the stored call, using ``details.repeats_collapsed``). Values come
from spans (untrusted): the table escapes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.views.table import render_table

HEADERS = ("LOST", "KIND", "TOOL", "ARGUMENT", "PREDICTED", "REFERENCE")


def render_losses(details: Mapping[str, Any]) -> list[str]:
    """The loss table of one evaluation (indented for the scores section), or nothing when the
    explanation has no labels (a perfect score, or scored before the labels existed)."""
    losses = details.get("losses")
    if not isinstance(losses, list):
        return []
    dropped = _dropped(details.get("repeats_collapsed"))
    rows = [_row(label, dropped) for label in losses if isinstance(label, Mapping)]
    if not rows:
        return []
    # Leave out the columns no label fills (F1's labels have no positions nor arguments).
    keep = [0, 1, 2] + [i for i in (3, 4, 5) if any(row[i] != "-" for row in rows)]
    table = render_table([HEADERS[i] for i in keep], [[row[i] for i in keep] for row in rows])
    return ["    lost points:", *("      " + line for line in table.splitlines())]


def _row(label: Mapping[str, Any], dropped: Sequence[int]) -> list[str]:
    points = label.get("points")
    tool = label.get("tool")
    argument = label.get("argument")
    return [
        f"{points:.4g}" if isinstance(points, int | float) else "-",
        str(label.get("kind", "?")),
        "-" if tool is None else str(tool),
        "-" if argument is None else str(argument),
        _number(label.get("predicted"), dropped),
        _number(label.get("expected"), ()),
    ]


def _number(position: Any, dropped: Sequence[int]) -> str:
    """``#N`` as the tool-call table numbers the call: 1-based, counting the collapsed repeats
    (``dropped``: their indices among the stored calls, ascending) that scoring left out."""
    if not isinstance(position, int) or isinstance(position, bool):
        return "-"
    stored = position
    for index in dropped:
        if index <= stored:
            stored += 1
    return f"#{stored + 1}"


def _dropped(value: Any) -> list[int]:
    if not isinstance(value, list):
        return []
    return sorted(i for i in value if isinstance(i, int) and not isinstance(i, bool))
