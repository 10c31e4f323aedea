"""Imports every table module so that ``toolscore.storage.base.Base.metadata`` is complete.

Each owner of a table module adds one import line here.
"""

from __future__ import annotations

from toolscore.storage import expectations as expectations
from toolscore.storage import exports as exports
from toolscore.storage import pipeline as pipeline
from toolscore.storage import rescore as rescore
from toolscore.storage import rollup as rollup
from toolscore.storage import telemetry as telemetry
from toolscore.storage import tool_rollup as tool_rollup
from toolscore.storage import traces as traces
from toolscore.storage.base import Base

metadata = Base.metadata

__all__ = [
    "Base",
    "expectations",
    "exports",
    "metadata",
    "pipeline",
    "rescore",
    "rollup",
    "telemetry",
    "tool_rollup",
    "traces",
]
