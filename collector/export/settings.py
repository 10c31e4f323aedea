"""Write-back configuration: flags first, then the standard ``OTEL_EXPORTER_OTLP_*`` variables.

The environment is passed in (``resolve_export_settings(..., environ=os.environ)`` by ``serve``)
and read once at start-up, never at import. The write-back is on only when toolscore's own
``--export-endpoint`` (or ``--export-traces-endpoint`` / ``--export-logs-endpoint``, or their
``TOOLSCORE_EXPORT_*`` variables) names a target; then these variables refine it, as the OTLP
exporter spec defines them: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._LOGS_ENDPOINT`` (used
as is, no path appended; each wins over the base URL for its signal),
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` | ``http/protobuf``) and the per-signal
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``..._LOGS_PROTOCOL``, ``OTEL_EXPORTER_OTLP_HEADERS``
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from toolscore.collector.configuration import (
    ConfigError,
    Option,
    choice,
    metric_level,
    positive_seconds,
    resolve_one,
)
from toolscore.collector.export.annotations.targets import ANNOTATE
from toolscore.collector.export.headers import (
    Headers,
    header_item,
    merge_headers,
    parse_headers,
    read_headers_file,
)

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP = "http/protobuf"
PROTOCOLS = (PROTOCOL_GRPC, PROTOCOL_HTTP)
SIGNALS = ("traces", "logs")
COMPRESSIONS = ("gzip", "none")
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Where and how evaluations are written back, and the outbox worker's pacing."""

    protocol: str  # of the trace export
    traces_endpoint: str  # grpc: host:port URL; http/protobuf: full URL of /v1/traces
    logs_endpoint: str
    signals: tuple[str, ...] = SIGNALS  # what is sent: traces (spans), logs (events)
    logs_protocol: str = ""  # "": as ``protocol``
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

    def protocol_of(self, signal: str) -> str:
        return (self.logs_protocol or self.protocol) if signal == "logs" else self.protocol

    def endpoint_of(self, signal: str) -> str:
        return self.logs_endpoint if signal == "logs" else self.traces_endpoint

    def backoff_s(self, attempts: int) -> float:
        """Delay before attempt ``attempts + 1``: doubling from the initial delay, capped."""
        return min(self.max_backoff_s, self.initial_backoff_s * math.pow(2, max(0, attempts)))


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


def _signals(text: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not items or any(item not in SIGNALS for item in items):
        raise ValueError("expected traces, logs or traces,logs")
    return items


SIGNALS_OPTION = Option(
    "--export-signals",
    "signals",
    "what the write-back sends: traces (an evaluation span in the evaluated trace), logs "
    "(a gen_ai.evaluation.result event) or both",
    parse=_signals,
    default=SIGNALS,
    metavar="traces|logs|traces,logs",
    shown_default="traces,logs",
)
TRACES_ENDPOINT = Option(
    "--export-traces-endpoint",
    "traces_endpoint",
    "where evaluation spans go, used as is (for http/protobuf the full URL, e.g. "
    "http://host:4318/v1/traces); beats --export-endpoint for spans",
    parse=_endpoint,
    more_env=(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", _endpoint),),
    metavar="URL",
    shown_default="from --export-endpoint",
)
LOGS_ENDPOINT = Option(
    "--export-logs-endpoint",
    "logs_endpoint",
    "where evaluation events go, used as is (for http/protobuf the full URL, e.g. "
    "http://host:4318/v1/logs); beats --export-endpoint for events",
    parse=_endpoint,
    more_env=(("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", _endpoint),),
    metavar="URL",
    shown_default="from --export-endpoint",
)


HEADERS_FILE = Option(
    "--export-headers-file",
    "headers_file",
    "export headers from a file of key=value lines (values literal, # comments)",
    metavar="PATH",
)
NO_EXPORT = Option(
    "--no-export",
    "disabled",
    "disable the write-back (OTLP and annotations) even if an endpoint is configured",
    kind="switch",
    default=False,
    shown_default="write-back as configured",
)
OPTIONS: tuple[Option, ...] = (
    ENDPOINT,
    TRACES_ENDPOINT,
    LOGS_ENDPOINT,
    SIGNALS_OPTION,
    PROTOCOL,
    Option(
        "--export-header",
        "headers",
        "header sent with every export, e.g. authorization=Bearer%20T; repeatable; the "
        "variable is k=v,k2=v2; per key it beats --export-headers-file, which beats "
        "OTEL_EXPORTER_OTLP_HEADERS (flags show in ps: prefer the file for secrets)",
        parse=header_item,
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
    ANNOTATE,
    NO_EXPORT,
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
    signals: Sequence[str] | None = None,
    traces_endpoint: str | None = None,
    logs_endpoint: str | None = None,
    environ: Mapping[str, str],
    **pacing: float | int,
) -> ExportSettings | None:
    """Settings from flags and ``environ``; ``None`` when neither ``--export-endpoint``, a
    per-signal ``--export-*-endpoint`` nor their ``TOOLSCORE_EXPORT_*`` variables name one (no
    export); the ``OTEL_EXPORTER_OTLP_*`` variables then refine it (per-signal endpoints and
    protocols, headers, compression, timeout, certificates). A value left None is resolved from
    ``environ`` by the option's declaration above.

    ``endpoint`` is a base URL: for http/protobuf the signal paths are appended unless it already
    ends with ``/v1/traces``; a per-signal endpoint is used as is. ``headers`` are
    ``--export-header`` items and ``headers_file`` the ``--export-headers-file`` path (else
    ``TOOLSCORE_EXPORT_HEADERS_FILE``). ``pacing`` passes through to :class:`ExportSettings`
    (``batch_size``, ``poll_interval_s``, backoffs, ``lease_s``).
    """
    env = {k: v.strip() for k, v in environ.items() if k.startswith("OTEL_EXPORTER_OTLP_")}
    # Write-back is on only when asked for by toolscore's own setting: OTEL_EXPORTER_OTLP_ENDPOINT
    # is what agents set to reach toolscore, so it must not turn the write-back on (or loop it).
    base = ENDPOINT.read(endpoint) if endpoint else resolve_one(ENDPOINT, None, environ)
    own = {
        signal: given or resolve_one(replace(option, more_env=()), None, environ)
        for signal, option, given in (
            ("traces", TRACES_ENDPOINT, traces_endpoint),
            ("logs", LOGS_ENDPOINT, logs_endpoint),
        )
    }
    if not base and not any(own.values()):
        return None
    protocols = _protocols(protocol, env, environ)
    targets: dict[str, str] = {}
    for signal, option in (("traces", TRACES_ENDPOINT), ("logs", LOGS_ENDPOINT)):
        chosen = own[signal] or resolve_one(option, None, environ)
        if chosen:
            targets[signal] = option.read(chosen)  # a per-signal endpoint is used as is
        elif base:
            targets[signal] = _from_base(base, protocols[signal], signal)
    chosen_signals = tuple(signals) if signals else resolve_one(SIGNALS_OPTION, None, environ)
    traces_headers, logs_headers = _resolve_headers(headers, headers_file, env, environ)
    insecure_env = env.get("OTEL_EXPORTER_OTLP_INSECURE", "").lower()
    return ExportSettings(
        protocol=protocols["traces"],
        logs_protocol=protocols["logs"],
        traces_endpoint=targets.get("traces", ""),
        logs_endpoint=targets.get("logs", ""),
        signals=tuple(s for s in chosen_signals if s in targets),
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


def _protocols(
    flag: str | None, env: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """Per signal: the flag (or TOOLSCORE_EXPORT_PROTOCOL), else the per-signal OTEL variable,
    else the generic one, else grpc."""
    if flag:
        return dict.fromkeys(SIGNALS, PROTOCOL.read(flag))
    if environ.get(PROTOCOL.variable or "", "").strip():
        return dict.fromkeys(SIGNALS, resolve_one(PROTOCOL, None, environ))
    found: dict[str, str] = {}
    for signal in SIGNALS:
        name = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
        per_signal = replace(PROTOCOL, env=name, more_env=())
        found[signal] = resolve_one(per_signal if env.get(name) else PROTOCOL, None, environ)
    return found


def _from_base(base: str, protocol: str, signal: str) -> str:
    if protocol != PROTOCOL_HTTP:
        return base
    if base.rstrip("/").endswith("/v1/traces"):
        base = base.rstrip("/")[: -len("/v1/traces")]
    return _signal_url(base, signal)


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
