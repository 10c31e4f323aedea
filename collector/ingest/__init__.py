"""From decoded records to committed rows: the bounded ingest queue and group-commit writer
(a request is acknowledged only once committed), the guard that answers waiting requests when
a commit hangs, and the receiver's and writer's Prometheus metrics.

May import: ``otlp``, ``reconstruction`` (key attributes), storage's telemetry tables.
"""
