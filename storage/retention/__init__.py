"""Retention: deleting finished conversations' spans (span retention) or the conversations
whole (history retention) in small passes, with daily and per-tool rollups that keep their
scores.

May import: ``plumbing``, ``telemetry``, ``conversations``, ``history``.
"""
