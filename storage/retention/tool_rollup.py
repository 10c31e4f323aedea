"""The per-tool rollups of deleted conversations (migration 0013): what ``tool_scores`` and
``tool_argument_scores`` counted for a conversation, added to ``tool_score_rollup`` and
``tool_argument_score_rollup`` before history retention deletes it (the views add the rollups to
the live counts).

The counts are read from the current, scored ToolCallAccuracy evaluations' ``details`` exactly as
migration 0007's views read them: each ``pairs`` item is an expected and called call, matched
when its score is at least 1, wrong below; each ``losses`` label of another kind than
``wrong_argument`` counts as expected / called when it has an ``expected`` / ``predicted`` key,
as missing, extra, or misplaced (``order`` / ``group`` with an expected call), and its points;
``wrong_argument`` labels count per argument. ``tests/collector/upkeep/test_history_retention.py``
checks the views give the same rows before and after a deletion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Float, Table, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.retention.rollup import add_counts, current_scores_view

COUNTS = ("expected", "called", "matched", "wrong", "missing", "extra", "misplaced")


class ToolScoreRollup(Base):
    __tablename__ = "tool_score_rollup"

    day: Mapped[str] = mapped_column(Text, primary_key=True)
    expectation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    metric: Mapped[str] = mapped_column(Text, primary_key=True)
    tool: Mapped[str] = mapped_column(Text, primary_key=True)
    expected: Mapped[int] = mapped_column(Int64, nullable=False)
    called: Mapped[int] = mapped_column(Int64, nullable=False)
    matched: Mapped[int] = mapped_column(Int64, nullable=False)
    wrong: Mapped[int] = mapped_column(Int64, nullable=False)
    missing: Mapped[int] = mapped_column(Int64, nullable=False)
    extra: Mapped[int] = mapped_column(Int64, nullable=False)
    misplaced: Mapped[int] = mapped_column(Int64, nullable=False)
    points_lost: Mapped[float] = mapped_column(Float, nullable=False)


class ToolArgumentScoreRollup(Base):
    __tablename__ = "tool_argument_score_rollup"

    day: Mapped[str] = mapped_column(Text, primary_key=True)
    expectation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    metric: Mapped[str] = mapped_column(Text, primary_key=True)
    tool: Mapped[str] = mapped_column(Text, primary_key=True)
    argument: Mapped[str] = mapped_column(Text, primary_key=True)
    wrong: Mapped[int] = mapped_column(Int64, nullable=False)
    points_lost: Mapped[float] = mapped_column(Float, nullable=False)


tool_score_rollup: Table = ToolScoreRollup.__table__  # type: ignore[assignment]
tool_argument_score_rollup: Table = ToolArgumentScoreRollup.__table__  # type: ignore[assignment]

Key = tuple[str, str, str, str]


def _number(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None if value is None else str(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _count(
    details: Mapping[str, Any],
    at: tuple[str, str, str],
    tools: dict[Key, list[float]],
    arguments: dict[tuple[str, str, str, str, str], list[float]],
) -> None:
    for pair in details.get("pairs") or []:
        tool = _text(pair.get("name")) if isinstance(pair, dict) else None
        if tool is None:
            continue
        score = _number(pair.get("score"))
        row = tools[(*at, tool)]
        row[0] += 1
        row[1] += 1
        row[2] += 1 if score is not None and score >= 1 else 0
        row[3] += 1 if score is not None and score < 1 else 0
    for loss in details.get("losses") or []:
        if not isinstance(loss, dict):
            continue
        tool, kind = _text(loss.get("tool")), _text(loss.get("kind"))
        points = _number(loss.get("points"))
        if tool is None:
            continue
        if kind == "wrong_argument":
            argument = _text(loss.get("argument"))
            if argument is not None:
                cell = arguments[(*at, tool, argument)]
                cell[0] += 1
                cell[1] += points or 0.0
        row = tools[(*at, tool)]
        unpaired = kind is not None and kind != "wrong_argument"
        row[0] += 1 if unpaired and "expected" in loss else 0
        row[1] += 1 if unpaired and "predicted" in loss else 0
        row[4] += 1 if kind == "missing" else 0
        row[5] += 1 if kind == "extra" else 0
        row[6] += 1 if kind in ("order", "group") and "expected" in loss else 0
        row[7] += points or 0.0


def roll_up_tools(conn: Connection, conversation_ids: Sequence[str]) -> None:
    """Add the tool counts of ``conversation_ids``' current scored ToolCallAccuracy evaluations
    to the rollups (in the caller's transaction, before it deletes them)."""
    cs, e = current_scores_view.c, evaluations.c
    tools: dict[Key, list[float]] = defaultdict(lambda: [0.0] * 8)
    arguments: dict[tuple[str, str, str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for chunk in chunks(conversation_ids):
        rows = conn.execute(
            select(cs.day, cs.expectation_id, cs.metric, e.details)
            .select_from(current_scores_view.join(evaluations, e.id == cs.evaluation_id))
            .where(
                cs.conversation_id.in_(chunk),
                cs.metric_type == "tool_call_accuracy",
                cs.score.is_not(None),
            )
        )
        for day, exp, metric, details in rows:
            if isinstance(details, dict):
                _count(details, (str(day), exp, metric), tools, arguments)
    add_counts(
        conn,
        tool_score_rollup,
        [
            {**_keys(k), **{c: int(v[i]) for i, c in enumerate(COUNTS)}, "points_lost": v[7]}
            for k, v in sorted(tools.items())
        ],
        ("day", "expectation_id", "metric", "tool"),
        (*COUNTS, "points_lost"),
    )
    add_counts(
        conn,
        tool_argument_score_rollup,
        [
            {**_keys(k[:4]), "argument": k[4], "wrong": int(v[0]), "points_lost": v[1]}
            for k, v in sorted(arguments.items())
        ],
        ("day", "expectation_id", "metric", "tool", "argument"),
        ("wrong", "points_lost"),
    )


def _keys(key: Sequence[str]) -> dict[str, str]:
    return dict(zip(("day", "expectation_id", "metric", "tool"), key, strict=True))
