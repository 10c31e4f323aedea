"""Imports every table module so that ``toolscore.storage.base.Base.metadata`` is complete.

Each owner of a table module adds one import line here.
"""

from __future__ import annotations

from toolscore.storage.base import Base
from toolscore.storage.conversations import replays
from toolscore.storage.conversations import tables as pipeline
from toolscore.storage.expectations import repository as expectations
from toolscore.storage.history import deliveries, instance
from toolscore.storage.history import outbox as exports
from toolscore.storage.history import rescore_runs as rescore
from toolscore.storage.retention import rollup, tool_rollup
from toolscore.storage.telemetry import spans as telemetry
from toolscore.storage.telemetry import traces

metadata = Base.metadata

__all__ = [
    "Base",
    "deliveries",
    "expectations",
    "exports",
    "instance",
    "metadata",
    "pipeline",
    "replays",
    "rescore",
    "rollup",
    "telemetry",
    "tool_rollup",
    "traces",
]
