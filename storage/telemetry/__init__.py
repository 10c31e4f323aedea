"""The raw telemetry: ``spans``, ``log_records`` and ``traces`` tables, the exact round trip
between decoded records and rows, and PostgreSQL's day partitions.

May import: ``plumbing``, the spine (``base``, ``records``).
"""
