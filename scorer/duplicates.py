"""``duplicates: collapse``: consecutive identical calls (a retry after a tool error) count once.

Identical means the same tool name and equal arguments. Only neighbours collapse: calling a
tool again later, after other calls, is a second call.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscore.scorer.explain import format_call
from toolscore.scorer.model import ToolCall

DUPLICATE_POLICIES = ("keep", "collapse")


def collapse_repeats(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], list[int]]:
    """The calls with each run of identical neighbours reduced to its first, and the indices
    (in ``calls``) of the repeats left out."""
    kept: list[ToolCall] = []
    dropped: list[int] = []
    for i, call in enumerate(calls):
        if kept and kept[-1].name == call.name and kept[-1].args == call.args:
            dropped.append(i)
        else:
            kept.append(call)
    return kept, dropped


def repeats_reason(calls: Sequence[ToolCall], dropped: Sequence[int]) -> str:
    """The explanation's sentence for the repeats left out."""
    shown = ", ".join(format_call(calls[i]) for i in dropped[:3])
    more = f" (+{len(dropped) - 3} more)" if len(dropped) > 3 else ""
    return f"{len(dropped)} repeated calls counted once (duplicates: collapse): {shown}{more}"
