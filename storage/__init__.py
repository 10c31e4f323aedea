"""The database layer, the only place that speaks SQL (SQLAlchemy 2, Alembic). Rooms:

- ``plumbing/``: engines, dialect differences, call deadlines, fault classes, JSON codec;
- ``telemetry/``: the ``spans``, ``log_records`` and ``traces`` tables, PostgreSQL partitions;
- ``conversations/``: conversations and their scoring state (assignment, leases, backlog);
- ``history/``: evaluations and tool-call rows, the views read by reports, re-score runs, the
  export outbox;
- ``expectations/``: the versioned reference expectations and matching lookups;
- ``retention/``: span and history retention, and the rollups that keep deleted scores;
- ``migrations/``: Alembic revisions.

The spine: ``base`` (declarative base, column types), ``records`` (the decoded-telemetry
vocabulary the collector shares), ``database`` (opening a database), ``migrate``, ``schema``.
May import: ``toolscore.scorer`` only (never the collector).
"""
