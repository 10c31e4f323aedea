"""The page templates (Jinja2 with autoescaping: every value from spans is rendered as text)."""

from __future__ import annotations

import datetime as dt
import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import ChainableUndefined, Environment, FileSystemLoader, select_autoescape

TEMPLATES = Path(__file__).parent / "templates"


def _score(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.3g}" if isinstance(value, int | float) else str(value)


def _when(value: Any) -> str:
    if isinstance(value, str):
        text = value
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            return text
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return "–" if value is None else str(value)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _with(query: dict[str, str], **changes: Any) -> str:
    """``query`` with ``changes`` (None removes a key), as a URL query string."""
    merged = {k: v for k, v in {**query, **changes}.items() if v is not None}
    return urlencode(merged)


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=ChainableUndefined,  # stored shapes vary: a missing key renders empty
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(score=_score, when=_when, json=_json, pretty=_pretty)
    env.globals.update(with_query=_with)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
