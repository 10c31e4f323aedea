"""The score history: evaluation and tool-call rows, reading them back and through the SQL
views (reports, per-tool scores), re-score runs, and the export outbox.

May import: ``plumbing``, ``telemetry`` (the evaluated root span, for the write-back),
``conversations`` (tables).
"""
