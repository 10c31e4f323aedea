"""Importing expectations: a new id gets version 1, changed content (``content_hash``) a new
version that becomes the latest, unchanged content nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Connection, select, update

from toolscore.storage.conversations.user_input import normalize_user_input
from toolscore.storage.expectations.rules import match_problems
from toolscore.storage.expectations.tables import (
    EXPECTATIONS,
    MATCH_IDS,
    ExpectationData,
    as_utc,
    conversation_ids,
)
from toolscore.storage.plumbing.chunks import chunks

ImportStatus = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True, slots=True)
class ImportEntry:
    id: str
    version: int  # the latest version after the import
    status: ImportStatus


@dataclass(frozen=True, slots=True)
class ImportReport:
    entries: tuple[ImportEntry, ...] = field(default_factory=tuple)

    def _count(self, status: ImportStatus) -> int:
        return sum(1 for e in self.entries if e.status == status)

    @property
    def created(self) -> int:
        return self._count("created")

    @property
    def updated(self) -> int:
        return self._count("updated")

    @property
    def unchanged(self) -> int:
        return self._count("unchanged")


def content_hash(item: ExpectationData) -> str:
    """A digest of everything that affects scoring or matching (not of the id or timestamps).

    Reference and user input are hashed as given (key order matters to Ragas parity); the match
    rule and metric list are canonicalised so reordering them is not a change.
    """
    payload = [
        item.reference_tool_calls,
        item.user_input,
        list(item.metrics) if item.metrics is not None else None,
        _canonical_match(item.match),
    ]
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical_match(match: Mapping[str, Any] | None) -> Any:
    if match is None:
        return None
    out = dict(sorted(match.items()))
    if isinstance(out.get("conversation_id"), list):
        out["conversation_id"] = sorted(out["conversation_id"])
    return out


def _match_norm(match: Mapping[str, Any] | None) -> str | None:
    if not match or not isinstance(match.get("user_input"), str):
        return None
    return normalize_user_input(match["user_input"]) or None


def _latest_by_id(conn: Connection, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    for chunk in chunks(ids):
        stmt = select(EXPECTATIONS.c.id, EXPECTATIONS.c.version, EXPECTATIONS.c.content_hash).where(
            EXPECTATIONS.c.id.in_(chunk), EXPECTATIONS.c.is_latest.is_(True)
        )
        for rid, version, digest in conn.execute(stmt):
            found[rid] = (version, digest)
    return found


def import_expectations(
    conn: Connection, items: Iterable[ExpectationData], *, now: datetime | None = None
) -> ImportReport:
    """Store ``items``: a new id gets version 1, changed content a new version, the rest nothing.

    Atomic: when ``conn`` has no transaction yet, one is begun and committed here; otherwise the
    work joins the caller's transaction (the caller commits or rolls back). Duplicate ids in
    ``items`` and an invalid ``match`` (``rules.match_problems``) raise ``ValueError`` before
    anything is written.
    """
    batch = list(items)
    seen: set[str] = set()
    for item in batch:
        if item.id in seen:
            raise ValueError(f"duplicate expectation id {item.id!r} in one import")
        seen.add(item.id)
        if item.match is not None and (problems := match_problems(item.match)):
            where, message = problems[0]
            path = ".".join(str(w) for w in ("match", *where))
            raise ValueError(f"expectation {item.id!r}: {path}: {message}")
    created_at = as_utc(now) if now is not None else datetime.now(UTC)

    if conn.in_transaction():
        return _import(conn, batch, created_at)
    with conn.begin():
        return _import(conn, batch, created_at)


def _import(conn: Connection, batch: list[ExpectationData], created_at: datetime) -> ImportReport:
    latest = _latest_by_id(conn, [i.id for i in batch])
    entries: list[ImportEntry] = []
    new_rows: list[dict[str, Any]] = []
    match_rows: list[dict[str, Any]] = []
    superseded: list[str] = []
    for item in batch:
        digest = content_hash(item)
        previous = latest.get(item.id)
        if previous is not None and previous[1] == digest:
            entries.append(ImportEntry(item.id, previous[0], "unchanged"))
            continue
        version = 1 if previous is None else previous[0] + 1
        if previous is not None:
            superseded.append(item.id)
        entries.append(ImportEntry(item.id, version, "created" if previous is None else "updated"))
        new_rows.append(
            {
                "id": item.id,
                "version": version,
                "is_latest": True,
                "reference_tool_calls": item.reference_tool_calls,
                "user_input": item.user_input,
                "metrics": list(item.metrics) if item.metrics is not None else None,
                "match": dict(item.match) if item.match is not None else None,
                "match_user_input_norm": _match_norm(item.match),
                "content_hash": digest,
                "created_at": created_at,
            }
        )
        match_rows.extend(
            {"expectation_id": item.id, "version": version, "conversation_id": cid}
            for cid in conversation_ids(item.match)
        )
    # Clear the old latest flags first: the partial unique index allows one latest per id.
    for chunk in chunks(superseded):
        conn.execute(
            update(EXPECTATIONS)
            .where(EXPECTATIONS.c.id.in_(chunk), EXPECTATIONS.c.is_latest.is_(True))
            .values(is_latest=False)
        )
    if new_rows:
        conn.execute(EXPECTATIONS.insert(), new_rows)
    if match_rows:
        conn.execute(MATCH_IDS.insert(), match_rows)
    return ImportReport(tuple(entries))
