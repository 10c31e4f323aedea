"""The web UI's options: where it listens (``serve --ui``, ``toolscore ui --ui``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolscore.collector.configuration import FileSection, Option, resolve_one
from toolscore.collector.settings import Listen, listen_address

DEFAULT_UI = "127.0.0.1:8080"

# Off in ``serve`` unless asked for: OTLP is often exposed to agents, the UI rarely should be.
SERVE_UI = Option(
    "--ui",
    "ui",
    "web UI listener (its own port: expose OTLP without exposing the UI), or 'off'; "
    f"e.g. {DEFAULT_UI}",
    parse=listen_address,
    default=None,
    metavar="HOST:PORT",
    shown_default="off",
)
BROWSE_UI = Option(
    "--ui",
    "ui",
    "where the web UI listens",
    parse=listen_address,
    default=listen_address(DEFAULT_UI),
    metavar="HOST:PORT",
    shown_default=DEFAULT_UI,
)
OPTIONS = (SERVE_UI,)


def ui_listen(
    args: Any, environ: Mapping[str, str], file: FileSection | None = None
) -> Listen | None:
    """``serve``'s UI listener (None: no UI): flags > environment > ``file`` > default."""
    found: Listen | None = resolve_one(SERVE_UI, args, environ, file)
    return found
