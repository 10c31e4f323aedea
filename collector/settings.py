"""Settings of ``toolscore serve``'s receiver and storage: declared in :data:`OPTIONS`, read once
(flags > environment > configuration file > defaults, by
:mod:`toolscore.collector.configuration`), validated, frozen.

Every flag, its variable and its default are listed in docs/configuration.md (a test compares
them with :data:`OPTIONS`). Invalid values raise :class:`ConfigError` naming the flag and the
variable.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolscore.collector.configuration import (
    ConfigError,
    FileSection,
    Option,
    choice,
    one_word,
    positive_int,
    positive_seconds,
    resolve,
    resolve_one,
)

DB_ENV = "TOOLSCORE_DB"
DEFAULT_DB_URL = "sqlite:///./toolscore.db"

DEFAULT_GRPC = "127.0.0.1:4317"
DEFAULT_HTTP = "127.0.0.1:4318"
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024  # OTLP v1.11 recommendation
DEFAULT_MAX_ATTRIBUTE_BYTES = 64 * 1024
DEFAULT_MAX_QUEUED_SPANS = 100_000
DEFAULT_MAX_BATCH_SPANS = 20_000
# Export requests read, decoded or being stored at once (both transports): the memory they hold
# is at most this times --max-request-bytes (plus their decoded form). An SDK exporter sends one
# request at a time and a Collector's exporter 10 (its sending_queue.num_consumers).
DEFAULT_MAX_CONCURRENT_REQUESTS = 64
DEFAULT_RETRY_AFTER = 1.0
DEFAULT_SHUTDOWN_GRACE = 10.0
# Database deadlines (seconds). With these a database that goes silent turns /health 503 within
# about HEALTH_STUCK_AFTER + 1 s (11 s), a call stuck on a silent connection is abandoned after
# DB_CALL_DEADLINE (20 s) and the writer reconnects (exports succeed again at most ~20 s + one
# connect after the network returns), and SIGTERM exits within SHUTDOWN_GRACE + STOP_EXTRA_S.
DEFAULT_DB_CONNECT_TIMEOUT = 10.0  # libpq connect_timeout
DEFAULT_DB_STATEMENT_TIMEOUT = 15.0  # PostgreSQL statement_timeout
DEFAULT_DB_LOCK_TIMEOUT = 10.0  # PostgreSQL lock_timeout; SQLite busy timeout
DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT = 60.0  # PostgreSQL idle_in_transaction_session_timeout
DEFAULT_DB_CALL_DEADLINE = 20.0  # client side: a call unanswered this long is abandoned
DEFAULT_HEALTH_STUCK_AFTER = 10.0  # writer work or probe running longer: unhealthy
DEFAULT_LOG_INTERVAL = 60.0  # one activity line per period (silent when idle)
OFF = "off"


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int  # 0: pick a free port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def listen_address(text: str) -> Listen | None:
    """HOST:PORT (``[::1]:4317`` for IPv6); ``off`` disables the listener."""
    if text.strip().lower() == OFF:
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError("expected HOST:PORT (or 'off')")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError("port must be a number") from None
    if not 0 <= port <= 65535:
        raise ValueError("port must be between 0 and 65535")
    return Listen(host, port)


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise ValueError("log level must be DEBUG, INFO, WARNING or ERROR")
    return text.upper()


def _seconds(flag: str, field: str, default: float, help: str) -> Option:
    return Option(flag, field, help, parse=positive_seconds, default=default, metavar="SECONDS")


def _count(flag: str, field: str, default: int, help: str, shown: str | None = None) -> Option:
    return Option(
        flag, field, help, parse=positive_int, default=default, metavar="N", shown_default=shown
    )


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DB = Option(
    "--db",
    "db_url",
    "database URL, e.g. sqlite:///./toolscore.db or postgresql+psycopg://user@host:5432/name",
    default=DEFAULT_DB_URL,
    env=DB_ENV,
    metavar="URL",
)
GRPC = Option(
    "--grpc",
    "grpc",
    "OTLP/gRPC listener, or 'off'; port 0 picks a free port",
    parse=listen_address,
    default=listen_address(DEFAULT_GRPC),
    metavar="HOST:PORT",
    shown_default=DEFAULT_GRPC,
)
HTTP = Option(
    "--http",
    "http",
    "OTLP/HTTP listener (also /metrics and /health), or 'off'",
    parse=listen_address,
    default=listen_address(DEFAULT_HTTP),
    metavar="HOST:PORT",
    shown_default=DEFAULT_HTTP,
)
CONFIG = Option(
    "--config",
    "config_path",
    "scoring configuration file (metric instances and their options)",
    parse=Path,
    metavar="FILE",
    shown_default="the built-in instances",
)
TLS_CERT = Option(
    "--tls-cert",
    "tls_cert",
    "TLS certificate (PEM) for both listeners; needs --tls-key",
    parse=Path,
    metavar="FILE",
    shown_default="plaintext",
)
TLS_KEY = Option(
    "--tls-key",
    "tls_key",
    "TLS private key (PEM)",
    parse=Path,
    metavar="FILE",
    shown_default="plaintext",
)
AUTH_TOKEN = Option(
    "--auth-token",
    "auth_token",
    "require 'Authorization: Bearer TOKEN' on every export and /metrics request "
    "(prefer the variable: flags show in ps)",
    parse=one_word,
    metavar="TOKEN",
    secret=True,
)
MAX_QUEUED_SPANS = _count(
    "--max-queued-spans",
    "max_queued_spans",
    DEFAULT_MAX_QUEUED_SPANS,
    "spans and log records waiting to be stored before clients are told to retry",
)
MAX_BATCH_SPANS = _count(
    "--max-batch-spans",
    "max_batch_spans",
    DEFAULT_MAX_BATCH_SPANS,
    "most spans and log records per database transaction",
)
DB_STATEMENT_TIMEOUT = _seconds(
    "--db-statement-timeout",
    "db_statement_timeout_s",
    DEFAULT_DB_STATEMENT_TIMEOUT,
    "PostgreSQL: the server cancels a statement running longer (statement_timeout)",
)
DB_CALL_DEADLINE = _seconds(
    "--db-call-deadline",
    "db_call_deadline_s",
    DEFAULT_DB_CALL_DEADLINE,
    "PostgreSQL: a database call with no reply for this long is abandoned, its connection "
    "shut down and replaced; must exceed --db-statement-timeout",
)

OPTIONS: tuple[Option, ...] = (
    DB,
    GRPC,
    HTTP,
    CONFIG,
    Option(
        "--no-upgrade",
        "upgrade",
        "do not migrate the database at start",
        kind="switch",
        flag_value=False,
        default=True,
        env="TOOLSCORE_UPGRADE",
        env_is_field=True,
        shown_default="upgrade",
    ),
    TLS_CERT,
    TLS_KEY,
    AUTH_TOKEN,
    _count(
        "--max-request-bytes",
        "max_request_bytes",
        DEFAULT_MAX_REQUEST_BYTES,
        "largest request body, after decompression",
        shown="67108864 (64 MiB)",
    ),
    _count(
        "--max-attribute-bytes",
        "max_attribute_bytes",
        DEFAULT_MAX_ATTRIBUTE_BYTES,
        "longer string and bytes attribute values are truncated",
    ),
    MAX_QUEUED_SPANS,
    MAX_BATCH_SPANS,
    _count(
        "--max-concurrent-requests",
        "max_concurrent_requests",
        DEFAULT_MAX_CONCURRENT_REQUESTS,
        "export requests handled at once, gRPC and HTTP together; more are told to retry",
    ),
    _seconds(
        "--retry-after",
        "retry_after_s",
        DEFAULT_RETRY_AFTER,
        "retry delay suggested to clients when busy",
    ),
    _seconds(
        "--shutdown-grace",
        "shutdown_grace_s",
        DEFAULT_SHUTDOWN_GRACE,
        "time in-flight requests get to finish on shutdown",
    ),
    Option(
        "--log-level",
        "log_level",
        "DEBUG, INFO, WARNING or ERROR",
        parse=_log_level,
        default="INFO",
        metavar="LEVEL",
    ),
    _seconds(
        "--log-interval",
        "log_interval_s",
        DEFAULT_LOG_INTERVAL,
        "one INFO line per period with what was received, scored, unmatched and failed, "
        "and the backlog; none when idle",
    ),
    Option(
        "--log-format",
        "log_format",
        "text, or json: one JSON object per line (time, level, logger, message and structured "
        "fields) for log shippers",
        parse=choice("text", "json"),
        default="text",
        metavar="text|json",
    ),
    _seconds(
        "--db-connect-timeout",
        "db_connect_timeout_s",
        DEFAULT_DB_CONNECT_TIMEOUT,
        "PostgreSQL: give up a connection attempt after this long (libpq connect_timeout, "
        "whole seconds, at least 2)",
    ),
    DB_STATEMENT_TIMEOUT,
    _seconds(
        "--db-lock-timeout",
        "db_lock_timeout_s",
        DEFAULT_DB_LOCK_TIMEOUT,
        "longest wait for a lock: PostgreSQL lock_timeout, SQLite busy timeout",
    ),
    _seconds(
        "--db-idle-in-transaction-timeout",
        "db_idle_in_transaction_timeout_s",
        DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT,
        "PostgreSQL: the server ends a session idle this long inside a transaction, "
        "releasing its locks",
    ),
    DB_CALL_DEADLINE,
    _seconds(
        "--health-stuck-after",
        "health_stuck_after_s",
        DEFAULT_HEALTH_STUCK_AFTER,
        "/health answers 503 (gRPC health NOT_SERVING) while the ingest writer's database "
        "work or a database probe has run longer than this",
    ),
)


@dataclass(frozen=True, slots=True)
class Settings:
    db_url: str = DEFAULT_DB_URL
    grpc: Listen | None = Listen("127.0.0.1", 4317)  # None: gRPC listener off
    http: Listen | None = Listen("127.0.0.1", 4318)  # None: HTTP listener off
    config_path: Path | None = None  # scoring configuration file
    upgrade: bool = True  # run migrations at start
    tls_cert: Path | None = None
    tls_key: Path | None = None
    auth_token: str | None = field(default=None, repr=False)
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_attribute_bytes: int = DEFAULT_MAX_ATTRIBUTE_BYTES
    max_queued_spans: int = DEFAULT_MAX_QUEUED_SPANS
    max_batch_spans: int = DEFAULT_MAX_BATCH_SPANS
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS
    retry_after_s: float = DEFAULT_RETRY_AFTER
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE
    log_level: str = "INFO"
    db_connect_timeout_s: float = DEFAULT_DB_CONNECT_TIMEOUT
    db_statement_timeout_s: float = DEFAULT_DB_STATEMENT_TIMEOUT
    db_lock_timeout_s: float = DEFAULT_DB_LOCK_TIMEOUT
    db_idle_in_transaction_timeout_s: float = DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT
    db_call_deadline_s: float = DEFAULT_DB_CALL_DEADLINE
    health_stuck_after_s: float = DEFAULT_HEALTH_STUCK_AFTER
    log_interval_s: float = DEFAULT_LOG_INTERVAL
    log_format: str = "text"  # text | json (toolscore.collector.logformat)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace | None,
        environ: Mapping[str, str],
        file: FileSection | None = None,
    ) -> Settings:
        """Build from parsed ``serve`` flags, else ``environ``, else ``file``, else defaults."""
        settings = cls(**resolve(OPTIONS, args, environ, file))
        settings.validate()
        return settings

    def validate(self) -> None:
        """Check cross-field rules and files; raise ConfigError naming flags and variables."""
        from toolscore.storage.plumbing.engine import DatabaseUrlError, normalize_url

        try:
            normalize_url(self.db_url)
        except DatabaseUrlError as exc:
            raise DB.error(str(exc)) from None
        if self.grpc is None and self.http is None:
            raise ConfigError(f"both listeners are off: enable {GRPC.names()} or {HTTP.names()}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError(f"TLS needs both {TLS_CERT.names()} and {TLS_KEY.names()}")
        for path, option in ((self.tls_cert, TLS_CERT), (self.tls_key, TLS_KEY)):
            if path is not None and not path.is_file():
                raise option.error(f"no such file {path}")
        if self.config_path is not None and not self.config_path.is_file():
            raise CONFIG.error(f"no such file {self.config_path}")
        if self.max_batch_spans > self.max_queued_spans:
            raise ConfigError(
                f"{MAX_BATCH_SPANS.names()} ({self.max_batch_spans}) cannot exceed "
                f"{MAX_QUEUED_SPANS.names()} ({self.max_queued_spans})"
            )
        if self.db_call_deadline_s <= self.db_statement_timeout_s:
            raise ConfigError(
                f"{DB_CALL_DEADLINE.names()} must be longer than "
                f"{DB_STATEMENT_TIMEOUT.names()} (the server cancels a slow statement first; "
                "only a silent connection is abandoned)"
            )


def resolve_db_url(args: argparse.Namespace | None, environ: Mapping[str, str]) -> str:
    """The database URL: ``--db`` beats ``TOOLSCORE_DB`` beats the default SQLite file."""
    return str(resolve_one(DB, args, environ))
