"""Background components of ``serve`` that keep it healthy: SQLite checkpoints, span and
history retention passes, backlog gauges and the activity line, the database watchdog, and
leaving on time at shutdown.

May import: ``ingest`` (metrics, writer), ``export`` (backlog), storage.
"""
