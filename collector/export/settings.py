"""Write-back configuration: flags first, then the standard ``OTEL_EXPORTER_OTLP_*`` variables.

The environment is passed in (``resolve_export_settings(..., environ=os.environ)`` by ``serve``)
and read once at start-up, never at import. Variables honoured, as the OTLP exporter spec defines
them: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (base URL; for http/protobuf ``/v1/traces`` and ``/v1/logs``
are appended), ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._LOGS_ENDPOINT`` (used as is),
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` | ``http/protobuf``), ``OTEL_EXPORTER_OTLP_HEADERS``
(``k=v,k2=v2``, values URL-encoded), ``OTEL_EXPORTER_OTLP_COMPRESSION`` (``gzip`` | ``none``),
``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds), ``OTEL_EXPORTER_OTLP_INSECURE`` and
``OTEL_EXPORTER_OTLP_CERTIFICATE`` (a CA file for TLS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP = "http/protobuf"
PROTOCOLS = (PROTOCOL_GRPC, PROTOCOL_HTTP)
COMPRESSIONS = ("gzip", "none")
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"


class ExportConfigError(ValueError):
    """A write-back flag or ``OTEL_EXPORTER_OTLP_*`` variable has an invalid value."""


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Where and how evaluations are written back, and the outbox worker's pacing."""

    protocol: str
    traces_endpoint: str  # grpc: host:port URL; http/protobuf: full URL of /v1/traces
    logs_endpoint: str
    headers: tuple[tuple[str, str], ...] = ()
    compression: str = "none"
    timeout_s: float = 10.0  # per export call, including the SDK exporter's own retries
    insecure: bool | None = None  # grpc: None = plaintext for http:// URLs, TLS for https://
    certificate_file: str | None = None
    batch_size: int = 200
    poll_interval_s: float = 2.0  # also woken at once by ``notify()`` (serve: by the pipeline)
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 300.0
    lease_s: float = 120.0  # a claimed row is retried after this if the process died
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def backoff_s(self, attempts: int) -> float:
        """Delay before attempt ``attempts + 1``: doubling from the initial delay, capped."""
        return min(self.max_backoff_s, self.initial_backoff_s * math.pow(2, max(0, attempts)))


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """``k=v,k2=v2`` (OTLP header list, URL-encoded values) as pairs; keys are lower-cased."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ExportConfigError(f"invalid OTLP header {item.strip()!r}: expected key=value")
        pairs.append((unquote(key.strip()).lower(), unquote(value.strip())))
    return tuple(pairs)


def parse_thresholds(items: Sequence[str]) -> dict[str, float]:
    """``METRIC=VALUE`` items (metric instance name or metric type) as a mapping."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not name.strip() or not 0.0 <= number <= 1.0:
            raise ExportConfigError(
                f"invalid pass threshold {item!r}: expected METRIC=VALUE with VALUE in [0, 1]"
            )
        out[name.strip()] = number
    return out


def _signal_url(base: str, signal: str) -> str:
    return base.rstrip("/") + f"/v1/{signal}"


def resolve_export_settings(
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Sequence[str] = (),
    compression: str | None = None,
    timeout_s: float | None = None,
    thresholds: Mapping[str, float] | None = None,
    environ: Mapping[str, str],
    **pacing: float | int,
) -> ExportSettings | None:
    """Settings from flags and ``environ``; ``None`` when no endpoint is configured (no export).

    ``endpoint`` is a base URL: for http/protobuf the signal paths are appended unless it already
    ends with ``/v1/traces``. ``pacing`` passes through to :class:`ExportSettings`
    (``batch_size``, ``poll_interval_s``, backoffs, ``lease_s``).
    """
    env = {k: v.strip() for k, v in environ.items() if k.startswith("OTEL_EXPORTER_OTLP_")}
    proto = protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or PROTOCOL_GRPC
    if proto not in PROTOCOLS:
        raise ExportConfigError(
            f"unsupported OTLP protocol {proto!r}: use {' or '.join(PROTOCOLS)}"
        )
    base = endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
    traces_env = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    logs_env = env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "")
    if not (base or (traces_env and logs_env)):
        return None
    for url in (base, traces_env, logs_env):
        if url and urlparse(url).scheme not in ("http", "https"):
            raise ExportConfigError(f"invalid OTLP endpoint {url!r}: expected http(s)://host:port")
    if proto == PROTOCOL_HTTP:
        if base.rstrip("/").endswith("/v1/traces"):
            base = base.rstrip("/")[: -len("/v1/traces")]
        traces = traces_env if (traces_env and not endpoint) else _signal_url(base, "traces")
        logs = logs_env if (logs_env and not endpoint) else _signal_url(base, "logs")
    else:
        traces = traces_env if (traces_env and not endpoint) else base
        logs = logs_env if (logs_env and not endpoint) else base
    header_pairs = parse_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS", ""))
    for item in headers:
        header_pairs += parse_headers(item)
    comp = (compression or env.get("OTEL_EXPORTER_OTLP_COMPRESSION") or "none").lower()
    if comp not in COMPRESSIONS:
        raise ExportConfigError(f"unsupported OTLP compression {comp!r}: use gzip or none")
    if timeout_s is None and env.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        try:
            timeout_s = float(env["OTEL_EXPORTER_OTLP_TIMEOUT"]) / 1000.0  # the spec says ms
        except ValueError as exc:
            raise ExportConfigError(
                f"invalid OTEL_EXPORTER_OTLP_TIMEOUT {env['OTEL_EXPORTER_OTLP_TIMEOUT']!r}: "
                "expected milliseconds"
            ) from exc
    insecure_env = env.get("OTEL_EXPORTER_OTLP_INSECURE", "").lower()
    return ExportSettings(
        protocol=proto,
        traces_endpoint=traces,
        logs_endpoint=logs,
        headers=header_pairs,
        compression=comp,
        timeout_s=timeout_s if timeout_s is not None else 10.0,
        insecure=(insecure_env == "true") if insecure_env in ("true", "false") else None,
        certificate_file=env.get("OTEL_EXPORTER_OTLP_CERTIFICATE") or None,
        thresholds=dict(thresholds or {}),
        **pacing,  # type: ignore[arg-type]
    )
