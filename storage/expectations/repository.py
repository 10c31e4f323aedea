"""Reference expectations: the versioned ``expectations`` table, its repository and matching.

The names live in ``expectation_model`` (tables, rows), ``expectation_import`` (imports,
versions) and ``expectation_lookup`` (reads, matching); this module gathers them.

An expectation is identified by ``id``; every import that changes its content (compared through
``content_hash``) adds a new ``version`` and moves ``is_latest`` to it, so evaluations can record
exactly which version they were scored against. Unchanged re-imports add nothing.

``match.conversation_id`` may be a string or a list; the ids are also written to the small side
table ``expectation_match_ids`` so that "which expectation names this conversation" is one indexed
lookup on SQLite and PostgreSQL alike, without dialect-specific JSON operators.
"""

from __future__ import annotations

from toolscore.storage.conversations.user_input import normalize_user_input
from toolscore.storage.expectations.importing import (
    ImportEntry,
    ImportReport,
    ImportStatus,
    content_hash,
    import_expectations,
)
from toolscore.storage.expectations.lookup import (
    all_by_user_input,
    expectations_stamp,
    find_by_conversation_id,
    find_by_id,
    find_by_user_input,
    get_latest,
    get_version,
    latest_rules,
    list_expectations,
    list_versions,
    match_expectation,
)
from toolscore.storage.expectations.tables import (
    EXPECTATIONS,
    MATCH_IDS,
    ExactJson,
    Expectation,
    ExpectationData,
    ExpectationMatchId,
    ExpectationRow,
)

__all__ = [
    "EXPECTATIONS",
    "MATCH_IDS",
    "ExactJson",
    "Expectation",
    "ExpectationData",
    "ExpectationMatchId",
    "ExpectationRow",
    "ImportEntry",
    "ImportReport",
    "ImportStatus",
    "all_by_user_input",
    "content_hash",
    "expectations_stamp",
    "find_by_conversation_id",
    "find_by_id",
    "find_by_user_input",
    "get_latest",
    "get_version",
    "import_expectations",
    "latest_rules",
    "list_expectations",
    "list_versions",
    "match_expectation",
    "normalize_user_input",  # storage.conversations.user_input's, the one form matching uses
]
