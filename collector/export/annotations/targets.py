"""``--annotate phoenix=URL`` / ``--annotate langfuse=URL``: where annotations go, and as whom.

Credentials come from the variables each backend's own SDK reads: ``PHOENIX_API_KEY`` (sent as
``Authorization: Bearer``; none for a Phoenix without authentication), ``LANGFUSE_PUBLIC_KEY`` and
``LANGFUSE_SECRET_KEY`` (HTTP basic authentication, both required).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

from toolscore.collector.configuration import ConfigError, Option

KINDS = ("phoenix", "langfuse")


@dataclass(frozen=True, slots=True)
class AnnotationTarget:
    kind: str  # phoenix | langfuse
    url: str  # base URL, without a trailing slash
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials

    @property
    def key(self) -> str:
        """The target's name in the outbox and in /metrics."""
        return f"{self.kind}={self.url}"


def _item(text: str) -> tuple[str, str]:
    kind, sep, url = text.partition("=")
    kind, url = kind.strip().lower(), url.strip().rstrip("/")
    if not sep or kind not in KINDS:
        raise ValueError("expected phoenix=URL or langfuse=URL")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"expected {kind}=http(s)://host:port")
    if parsed.username or parsed.password:
        raise ValueError("credentials go in the backend's variables, not in the URL")
    return kind, url


ANNOTATE = Option(
    "--annotate",
    "annotate",
    "also write scores as the backend's own annotations: phoenix=URL (span, trace and session "
    "annotations; PHOENIX_API_KEY) or langfuse=URL (scores; LANGFUSE_PUBLIC_KEY and "
    "LANGFUSE_SECRET_KEY); repeatable; the variable is comma-separated",
    parse=_item,
    kind="list",
    metavar="KIND=URL",
    shown_default="none",
    secret=True,  # a URL with credentials in it is refused without being echoed
)


def annotation_targets(
    items: Sequence[tuple[str, str]], environ: Mapping[str, str]
) -> tuple[AnnotationTarget, ...]:
    """The targets of ``--annotate`` items, with their credentials from ``environ``."""
    targets: dict[str, AnnotationTarget] = {}
    for kind, url in items:
        target = AnnotationTarget(kind, url, _credentials(kind, environ))
        targets.setdefault(target.key, target)
    return tuple(targets.values())


def _credentials(kind: str, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if kind == "phoenix":
        key = environ.get("PHOENIX_API_KEY", "").strip()
        return (("authorization", f"Bearer {key}"),) if key else ()
    public = environ.get("LANGFUSE_PUBLIC_KEY", "").strip()
    secret = environ.get("LANGFUSE_SECRET_KEY", "").strip()
    if not public or not secret:
        raise ConfigError(
            f"{ANNOTATE.flag} langfuse=URL: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
            "(the project's API keys)"
        )
    token = base64.b64encode(f"{public}:{secret}".encode()).decode()
    return (("authorization", f"Basic {token}"),)
