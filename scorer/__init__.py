"""Pure scoring of tool calls: Ragas 0.4.3-parity ToolCallAccuracy / ToolCallF1 and extensions.

No I/O (except :func:`load_config` reading its one file), no async. Public API:
:class:`ToolCall`, :func:`parse_sample`, :func:`parse_reference`, :func:`default_config`,
:func:`load_config`, :func:`parse_config`, :class:`ScoringConfig`, :class:`MetricInstance`,
:class:`Score`, :class:`SampleError`, :class:`ConfigError`.
"""

from __future__ import annotations

from toolscore.scorer.config import (
    MetricInstance,
    ScoringConfig,
    default_config,
    load_config,
    parse_config,
)
from toolscore.scorer.model import (
    ConfigError,
    Message,
    Reference,
    Sample,
    SampleError,
    Score,
    ToolCall,
)
from toolscore.scorer.parse import parse_reference, parse_sample

__all__ = [
    "ConfigError",
    "Message",
    "MetricInstance",
    "Reference",
    "Sample",
    "SampleError",
    "Score",
    "ScoringConfig",
    "ToolCall",
    "default_config",
    "load_config",
    "parse_config",
    "parse_reference",
    "parse_sample",
]
