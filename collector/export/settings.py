"""Write-back configuration: flags first, then the standard ``OTEL_EXPORTER_OTLP_*`` variables.

The environment is passed in (``resolve_export_settings(..., environ=os.environ)`` by ``serve``)
and read once at start-up, never at import. Variables honoured, as the OTLP exporter spec defines
them: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (base URL; for http/protobuf ``/v1/traces`` and ``/v1/logs``
are appended), ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._LOGS_ENDPOINT`` (used as is),
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` | ``http/protobuf``), ``OTEL_EXPORTER_OTLP_HEADERS``
(``k=v,k2=v2``, values URL-encoded) and the per-signal ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` /
``..._LOGS_HEADERS`` (each replaces the generic list for its signal, as the spec says),
``OTEL_EXPORTER_OTLP_COMPRESSION`` (``gzip`` | ``none``),
``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds), ``OTEL_EXPORTER_OTLP_INSECURE`` and
``OTEL_EXPORTER_OTLP_CERTIFICATE`` (a CA file for TLS).

Secrets: headers (API keys, bearer tokens) can come from a file (``--export-headers-file`` or
``TOOLSCORE_EXPORT_HEADERS_FILE``: ``key=value`` lines, values taken literally) instead of the
command line, where ``ps`` shows them. Precedence per key: ``--export-header`` flags, then the
file, then the environment. Header values never appear in an error message or a ``repr``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from toolscore.collector.configuration import (
    ConfigError,
    Option,
    choice,
    metric_level,
    positive_seconds,
    resolve_one,
)

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP = "http/protobuf"
PROTOCOLS = (PROTOCOL_GRPC, PROTOCOL_HTTP)
COMPRESSIONS = ("gzip", "none")
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
ENV_HEADERS_FILE = "TOOLSCORE_EXPORT_HEADERS_FILE"
MAX_HEADERS_FILE_BYTES = 64 * 1024

Headers = tuple[tuple[str, str], ...]
_HEADER_KEY = re.compile(r"^[a-z0-9!#$%&'*+.^_`|~-]+$")  # an HTTP token, lower-cased
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Where and how evaluations are written back, and the outbox worker's pacing."""

    protocol: str
    traces_endpoint: str  # grpc: host:port URL; http/protobuf: full URL of /v1/traces
    logs_endpoint: str
    headers: Headers = field(default=(), repr=False)  # of the trace export (secret values)
    logs_headers: Headers = field(default=(), repr=False)  # of the log export
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


def parse_headers(text: str, source: str = "OTEL_EXPORTER_OTLP_HEADERS") -> Headers:
    """``k=v,k2=v2`` (OTLP header list, URL-encoded values) as pairs; keys are lower-cased.

    ``source`` names the flag or variable in errors, which never show a value.
    """
    pairs: list[tuple[str, str]] = []
    for n, item in enumerate(text.split(","), start=1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        where = f"{source}, item {n}"
        pairs.append(_header(unquote(key.strip()), unquote(value.strip()), sep, where))
    return tuple(pairs)


def _header(key: str, value: str, sep: str, where: str) -> tuple[str, str]:
    """A validated (lower-cased key, value); errors name the key at most, never the value."""
    key = key.lower()
    if not sep or not key:
        raise ConfigError(f"invalid OTLP header ({where}): expected key=value")
    if not _HEADER_KEY.match(key):
        raise ConfigError(
            f"invalid OTLP header ({where}): the key must be a header name (letters, digits, -)"
        )
    if _CONTROL.search(value):
        raise ConfigError(
            f"invalid OTLP header {key!r} ({where}): the value holds control characters"
        )
    return key, value


def read_headers_file(path: str | Path) -> Headers:
    """Headers from a file of ``key=value`` lines (blank lines and ``# comments`` skipped).

    Values are taken literally (no URL decoding), trimmed; keys are lower-cased.
    """
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_HEADERS_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"export headers file {where}: {exc.strerror}") from None
    if len(data) > MAX_HEADERS_FILE_BYTES:
        raise ConfigError(f"export headers file {where}: larger than 64 KiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"export headers file {where}: not UTF-8 text") from None
    pairs: list[tuple[str, str]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        pairs.append(_header(key.strip(), value.strip(), sep, f"{where}:{n}"))
    return tuple(pairs)


def merge_headers(*layers: Iterable[tuple[str, str]]) -> Headers:
    """Later layers win per key (first position kept); repeats within one layer are kept."""
    merged: dict[str, list[str]] = {}
    for layer in layers:
        this: dict[str, list[str]] = {}
        for key, value in layer:
            this.setdefault(key, []).append(value)
        merged.update(this)
    return tuple((key, value) for key, values in merged.items() for value in values)


def _signal_url(base: str, signal: str) -> str:
    return base.rstrip("/") + f"/v1/{signal}"


def _milliseconds(text: str) -> float:
    try:
        return float(text) / 1000.0  # the OTLP exporter spec says milliseconds
    except ValueError:
        raise ValueError("expected milliseconds") from None


def _endpoint(text: str) -> str:
    if urlparse(text).scheme not in ("http", "https"):
        raise ValueError("expected http(s)://host:port")
    return text


ENDPOINT = Option(
    "--export-endpoint",
    "endpoint",
    "write evaluations back as OTLP spans and gen_ai.evaluation.result events to this "
    "collector/backend, e.g. http://localhost:4317; the OTEL_EXPORTER_OTLP_* variables "
    "then refine it",
    parse=_endpoint,
    metavar="URL",
    shown_default="no write-back",
)
PROTOCOL = Option(
    "--export-protocol",
    "protocol",
    "OTLP protocol of the write-back",
    parse=choice(*PROTOCOLS),
    default=PROTOCOL_GRPC,
    more_env=(("OTEL_EXPORTER_OTLP_PROTOCOL", choice(*PROTOCOLS)),),
    metavar="|".join(PROTOCOLS),
)
COMPRESSION = Option(
    "--export-compression",
    "compression",
    "compression of the write-back's requests",
    parse=choice(*COMPRESSIONS),
    default="none",
    more_env=(("OTEL_EXPORTER_OTLP_COMPRESSION", choice(*COMPRESSIONS)),),
    metavar="|".join(COMPRESSIONS),
)
TIMEOUT = Option(
    "--export-timeout",
    "timeout_s",
    "per export call, SDK retries included (OTEL_EXPORTER_OTLP_TIMEOUT is in milliseconds)",
    parse=positive_seconds,
    default=10.0,
    more_env=(("OTEL_EXPORTER_OTLP_TIMEOUT", _milliseconds),),
    metavar="SECONDS",
)


def _header_item(text: str) -> tuple[str, str]:
    """One ``key=value`` header (URL-encoded, as in ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    key, sep, value = text.partition("=")
    key = unquote(key.strip()).lower()
    if not sep or not _HEADER_KEY.match(key):
        raise ValueError("expected KEY=VALUE with KEY a header name (letters, digits, -)")
    value = unquote(value.strip())
    if _CONTROL.search(value):
        raise ValueError(f"the value of header {key!r} holds control characters")
    return key, value


HEADERS_FILE = Option(
    "--export-headers-file",
    "headers_file",
    "export headers from a file of key=value lines (values literal, # comments)",
    metavar="PATH",
)
OPTIONS: tuple[Option, ...] = (
    ENDPOINT,
    PROTOCOL,
    Option(
        "--export-header",
        "headers",
        "header sent with every export, e.g. authorization=Bearer%20T; repeatable; the "
        "variable is k=v,k2=v2; per key it beats --export-headers-file, which beats "
        "OTEL_EXPORTER_OTLP_HEADERS (flags show in ps: prefer the file for secrets)",
        parse=_header_item,
        kind="list",
        env="TOOLSCORE_EXPORT_HEADERS",
        metavar="KEY=VALUE",
        secret=True,
    ),
    HEADERS_FILE,
    COMPRESSION,
    TIMEOUT,
    Option(
        "--pass-threshold",
        "thresholds",
        "score at or above which METRIC (instance name or type) passes; stored in the database "
        "for the views and reports; repeatable; the variable is comma-separated",
        parse=metric_level,
        kind="list",
        env="TOOLSCORE_PASS_THRESHOLDS",
        metavar="METRIC=VALUE",
        shown_default="1.0",
    ),
    Option(
        "--no-export",
        "disabled",
        "disable the write-back even if an endpoint is configured",
        kind="switch",
        default=False,
        shown_default="write-back as configured",
    ),
)


def resolve_export_settings(
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Sequence[str | tuple[str, str]] = (),
    headers_file: str | None = None,
    compression: str | None = None,
    timeout_s: float | None = None,
    thresholds: Mapping[str, float] | None = None,
    environ: Mapping[str, str],
    **pacing: float | int,
) -> ExportSettings | None:
    """Settings from flags and ``environ``; ``None`` when neither ``--export-endpoint`` nor
    ``TOOLSCORE_EXPORT_ENDPOINT`` names one (no export); the ``OTEL_EXPORTER_OTLP_*`` variables
    then refine it (protocol, headers, compression, timeout, certificates). A value left None
    is resolved from ``environ`` by the option's declaration above.

    ``endpoint`` is a base URL: for http/protobuf the signal paths are appended unless it already
    ends with ``/v1/traces``. ``headers`` are ``--export-header`` items and ``headers_file`` the
    ``--export-headers-file`` path (else ``TOOLSCORE_EXPORT_HEADERS_FILE``). ``pacing`` passes
    through to :class:`ExportSettings` (``batch_size``, ``poll_interval_s``, backoffs,
    ``lease_s``).
    """
    env = {k: v.strip() for k, v in environ.items() if k.startswith("OTEL_EXPORTER_OTLP_")}
    proto = PROTOCOL.read(protocol) if protocol else resolve_one(PROTOCOL, None, environ)
    # Write-back is on only when asked for by toolscore's own setting: OTEL_EXPORTER_OTLP_ENDPOINT
    # is what agents set to reach toolscore, so it must not turn the write-back on (or loop it).
    base = ENDPOINT.read(endpoint) if endpoint else resolve_one(ENDPOINT, None, environ)
    if not base:
        return None
    if proto == PROTOCOL_HTTP:
        if base.rstrip("/").endswith("/v1/traces"):
            base = base.rstrip("/")[: -len("/v1/traces")]
        traces, logs = _signal_url(base, "traces"), _signal_url(base, "logs")
    else:
        traces = logs = base
    traces_headers, logs_headers = _resolve_headers(headers, headers_file, env, environ)
    insecure_env = env.get("OTEL_EXPORTER_OTLP_INSECURE", "").lower()
    return ExportSettings(
        protocol=proto,
        traces_endpoint=traces,
        logs_endpoint=logs,
        headers=traces_headers,
        logs_headers=logs_headers,
        compression=COMPRESSION.read(compression)
        if compression
        else resolve_one(COMPRESSION, None, environ),
        timeout_s=timeout_s if timeout_s is not None else resolve_one(TIMEOUT, None, environ),
        insecure=(insecure_env == "true") if insecure_env in ("true", "false") else None,
        certificate_file=env.get("OTEL_EXPORTER_OTLP_CERTIFICATE") or None,
        thresholds=dict(thresholds or {}),
        **pacing,  # type: ignore[arg-type]
    )


def _resolve_headers(
    flags: Sequence[str | tuple[str, str]],
    headers_file: str | None,
    env: Mapping[str, str],
    environ: Mapping[str, str],
) -> tuple[Headers, Headers]:
    """(trace export headers, log export headers): flags over the file over the environment."""
    generic = env.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    per_signal = []
    for signal in ("TRACES", "LOGS"):
        name = f"OTEL_EXPORTER_OTLP_{signal}_HEADERS"
        # a per-signal variable replaces the generic list for its signal (OTLP exporter spec)
        per_signal.append(
            parse_headers(env[name], name)
            if env.get(name)
            else parse_headers(generic, "OTEL_EXPORTER_OTLP_HEADERS")
        )
    path = headers_file or resolve_one(HEADERS_FILE, None, environ)
    try:
        from_file = read_headers_file(path) if path else ()
    except ConfigError as exc:
        raise ConfigError(f"{HEADERS_FILE.names()}: {exc}") from None
    # flag items come parsed from the option, or as text from code calling this directly
    from_flags = tuple(
        pair
        for item in flags
        for pair in (parse_headers(item, "--export-header") if isinstance(item, str) else (item,))
    )
    traces, logs = (merge_headers(env_pairs, from_file, from_flags) for env_pairs in per_signal)
    return traces, logs
