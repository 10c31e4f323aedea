"""Imports every table module so that ``storage.base.Base.metadata`` is complete.

Each owner of a table module adds one import line here.
"""

from __future__ import annotations

from storage import expectations as expectations
from storage import exports as exports
from storage import pipeline as pipeline
from storage import rescore as rescore
from storage import telemetry as telemetry
from storage.base import Base

metadata = Base.metadata

__all__ = ["Base", "expectations", "exports", "metadata", "pipeline", "rescore", "telemetry"]
