"""Why a conversation matched no expectation, in words an operator can act on.

Asked only once :func:`toolscore.storage.expectations.repository.match_expectation`'s three rules
found
nothing: each rule says what it looked for and, when an older version of an expectation would
have matched, that the latest version no longer does (matching uses latest versions only).
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, exists, func, select

from toolscore.storage.expectations.repository import EXPECTATIONS, MATCH_IDS

E = EXPECTATIONS.c


def unmatched_reason(
    conn: Connection,
    *,
    reference_id: str | None,
    conversation_id: str,
    normalized_message: str | None,
) -> str:
    """The reason stored with an unmatched conversation (``conversations.unmatched_reason``).

    ``normalized_message`` is the first user message as matching compares it (normalised,
    storable), or None when the conversation has none.
    """
    if not conn.execute(select(exists().where(E.is_latest.is_(True)))).scalar():
        return "no expectations are imported (toolscore refs import FILE)"
    clauses = [_by_reference(conn, reference_id), _by_conversation_id(conn, conversation_id)]
    clauses.append(_by_message(conn, normalized_message))
    return "; ".join(clauses)


def _by_reference(conn: Connection, reference_id: str | None) -> str:
    if not reference_id:
        return "no reference id on its spans (toolscore.reference.id)"
    return f"reference id {reference_id!r} names no expectation"


def _by_conversation_id(conn: Connection, conversation_id: str) -> str:
    m = MATCH_IDS.c
    stale = conn.execute(
        select(m.expectation_id, func.max(m.version))
        .where(m.conversation_id == conversation_id)
        .group_by(m.expectation_id)
        .order_by(m.expectation_id)
        .limit(1)
    ).first()
    if stale is None:
        return "no expectation's match.conversation_id names it"
    return _gone("match.conversation_id", stale[0], int(stale[1]), _latest_version(conn, stale[0]))


def _by_message(conn: Connection, normalized_message: str | None) -> str:
    if not normalized_message:
        return "it has no user message to match match.user_input against"
    stale = conn.execute(
        select(E.id, func.max(E.version))
        .where(E.match_user_input_norm == normalized_message)
        .group_by(E.id)
        .order_by(E.id)
        .limit(1)
    ).first()
    if stale is None:
        return "no expectation's match.user_input equals its first user message"
    return _gone("match.user_input", stale[0], int(stale[1]), _latest_version(conn, stale[0]))


def _latest_version(conn: Connection, expectation_id: str) -> int | None:
    found = conn.execute(
        select(E.version).where(and_(E.id == expectation_id, E.is_latest.is_(True)))
    ).scalar()
    return None if found is None else int(found)


def _gone(rule: str, expectation_id: str, version: int, latest: int | None) -> str:
    # only latest versions match: an older version naming it is why an operator expected a match
    now = "no longer exists" if latest is None else f"is version {latest}, whose {rule} does not"
    return (
        f"expectation {expectation_id!r} version {version} matched it by {rule}, "
        f"but its latest version {now}"
    )
