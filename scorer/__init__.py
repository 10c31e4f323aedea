"""Pure scoring of tool calls: Ragas 0.4.3-parity ToolCallAccuracy / ToolCallF1 and extensions.

No I/O (except :func:`load_config` reading its one file), no async. Public API:
:class:`ToolCall`, :func:`parse_sample`, :func:`parse_reference`, :func:`default_config`,
:func:`load_config`, :func:`parse_config`, :class:`ScoringConfig`, :class:`MetricInstance`,
:class:`Score`, :class:`SampleError`, :class:`ConfigError`.

The names are imported on first use (PEP 562), so that importing one submodule (e.g. the bulk
fast path of ``toolscore score``) does not import all the others.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

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

_HOMES = {
    "MetricInstance": "toolscore.scorer.config",
    "ScoringConfig": "toolscore.scorer.config",
    "default_config": "toolscore.scorer.config",
    "load_config": "toolscore.scorer.config",
    "parse_config": "toolscore.scorer.config",
    "ConfigError": "toolscore.scorer.model",
    "Message": "toolscore.scorer.model",
    "Reference": "toolscore.scorer.model",
    "Sample": "toolscore.scorer.model",
    "SampleError": "toolscore.scorer.model",
    "Score": "toolscore.scorer.model",
    "ToolCall": "toolscore.scorer.model",
    "parse_reference": "toolscore.scorer.parse",
    "parse_sample": "toolscore.scorer.parse",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'scorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


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
