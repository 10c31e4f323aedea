"""Conversations and their scoring state: the pipeline's tables, trace assignment, scoring
leases, the backlog questions, why a conversation matched nothing, the user-input form.

May import: ``plumbing``, ``telemetry``, ``expectations`` and ``history`` (shared tables).
"""
