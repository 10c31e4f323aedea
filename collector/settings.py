"""Settings of ``toolscore serve``: read once (flags > environment > defaults), validated, frozen.

Every environment variable is a constant here and documented in the README's configuration
reference. Invalid values raise :class:`SettingsError` with a message naming the flag/variable.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolscore.collector.commands.common import DB_ENV, DEFAULT_DB_URL, resolve_db_url

ENV_GRPC = "TOOLSCORE_GRPC"
ENV_HTTP = "TOOLSCORE_HTTP"
ENV_CONFIG = "TOOLSCORE_CONFIG"
ENV_UPGRADE = "TOOLSCORE_UPGRADE"
ENV_TLS_CERT = "TOOLSCORE_TLS_CERT"
ENV_TLS_KEY = "TOOLSCORE_TLS_KEY"
ENV_AUTH_TOKEN = "TOOLSCORE_AUTH_TOKEN"
ENV_MAX_REQUEST_BYTES = "TOOLSCORE_MAX_REQUEST_BYTES"
ENV_MAX_ATTRIBUTE_BYTES = "TOOLSCORE_MAX_ATTRIBUTE_BYTES"
ENV_MAX_QUEUED_SPANS = "TOOLSCORE_MAX_QUEUED_SPANS"
ENV_MAX_BATCH_SPANS = "TOOLSCORE_MAX_BATCH_SPANS"
ENV_MAX_CONCURRENT_REQUESTS = "TOOLSCORE_MAX_CONCURRENT_REQUESTS"
ENV_RETRY_AFTER = "TOOLSCORE_RETRY_AFTER"
ENV_SHUTDOWN_GRACE = "TOOLSCORE_SHUTDOWN_GRACE"
ENV_LOG_LEVEL = "TOOLSCORE_LOG_LEVEL"
ENV_DB_CONNECT_TIMEOUT = "TOOLSCORE_DB_CONNECT_TIMEOUT"
ENV_DB_STATEMENT_TIMEOUT = "TOOLSCORE_DB_STATEMENT_TIMEOUT"
ENV_DB_LOCK_TIMEOUT = "TOOLSCORE_DB_LOCK_TIMEOUT"
ENV_DB_IDLE_IN_TRANSACTION_TIMEOUT = "TOOLSCORE_DB_IDLE_IN_TRANSACTION_TIMEOUT"
ENV_DB_CALL_DEADLINE = "TOOLSCORE_DB_CALL_DEADLINE"
ENV_HEALTH_STUCK_AFTER = "TOOLSCORE_HEALTH_STUCK_AFTER"
ENV_LOG_INTERVAL = "TOOLSCORE_LOG_INTERVAL"
ENV_LOG_FORMAT = "TOOLSCORE_LOG_FORMAT"

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


class SettingsError(ValueError):
    """A flag or environment variable has an invalid value."""


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int  # 0: pick a free port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


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
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
        """Build from parsed ``serve`` flags, falling back to ``environ``, then defaults."""

        def pick(flag: str, env: str, default: str | None) -> tuple[str | None, str]:
            value = getattr(args, flag, None)
            if value is not None:
                return str(value), "--" + flag.replace("_", "-")
            if environ.get(env, "").strip():
                return environ[env].strip(), env
            return default, "default"

        grpc_text, grpc_src = pick("grpc", ENV_GRPC, DEFAULT_GRPC)
        http_text, http_src = pick("http", ENV_HTTP, DEFAULT_HTTP)
        config_text, config_src = pick("config", ENV_CONFIG, None)
        cert_text, cert_src = pick("tls_cert", ENV_TLS_CERT, None)
        key_text, key_src = pick("tls_key", ENV_TLS_KEY, None)
        token, token_src = pick("auth_token", ENV_AUTH_TOKEN, None)
        if getattr(args, "no_upgrade", False):
            upgrade = False
        else:
            upgrade = _bool(environ.get(ENV_UPGRADE, "1"), ENV_UPGRADE)

        def num(flag: str, env: str, default: float, kind: type[int] | type[float]) -> float:
            text, src = pick(flag, env, None)
            if text is None:
                return default
            try:
                value = kind(text)
            except ValueError:
                raise SettingsError(f"{src}: {text!r} is not a valid {kind.__name__}") from None
            if value <= 0:
                raise SettingsError(f"{src}: must be greater than 0, got {text}")
            return value

        settings = cls(
            db_url=resolve_db_url(args, environ),
            grpc=_listen(grpc_text or DEFAULT_GRPC, grpc_src),
            http=_listen(http_text or DEFAULT_HTTP, http_src),
            config_path=Path(config_text) if config_text else None,
            upgrade=upgrade,
            tls_cert=Path(cert_text) if cert_text else None,
            tls_key=Path(key_text) if key_text else None,
            auth_token=token or None,
            max_request_bytes=int(
                num("max_request_bytes", ENV_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES, int)
            ),
            max_attribute_bytes=int(
                num(
                    "max_attribute_bytes", ENV_MAX_ATTRIBUTE_BYTES, DEFAULT_MAX_ATTRIBUTE_BYTES, int
                )
            ),
            max_queued_spans=int(
                num("max_queued_spans", ENV_MAX_QUEUED_SPANS, DEFAULT_MAX_QUEUED_SPANS, int)
            ),
            max_batch_spans=int(
                num("max_batch_spans", ENV_MAX_BATCH_SPANS, DEFAULT_MAX_BATCH_SPANS, int)
            ),
            max_concurrent_requests=int(
                num(
                    "max_concurrent_requests",
                    ENV_MAX_CONCURRENT_REQUESTS,
                    DEFAULT_MAX_CONCURRENT_REQUESTS,
                    int,
                )
            ),
            retry_after_s=num("retry_after", ENV_RETRY_AFTER, DEFAULT_RETRY_AFTER, float),
            shutdown_grace_s=num(
                "shutdown_grace", ENV_SHUTDOWN_GRACE, DEFAULT_SHUTDOWN_GRACE, float
            ),
            log_level=(pick("log_level", ENV_LOG_LEVEL, "INFO")[0] or "INFO").upper(),
            **_deadlines(num),
            log_interval_s=num("log_interval", ENV_LOG_INTERVAL, DEFAULT_LOG_INTERVAL, float),
            log_format=(pick("log_format", ENV_LOG_FORMAT, "text")[0] or "text").strip().lower(),
        )
        settings.validate(
            sources={"config": config_src, "cert": cert_src, "key": key_src, "token": token_src}
        )
        return settings

    def validate(self, sources: Mapping[str, str] | None = None) -> None:
        """Check cross-field rules and files; raise SettingsError with a clear message."""
        src = dict(sources or {})
        from toolscore.storage.engine import DatabaseUrlError, normalize_url

        try:
            normalize_url(self.db_url)
        except DatabaseUrlError as exc:
            raise SettingsError(f"--db / {DB_ENV}: {exc}") from None
        if self.grpc is None and self.http is None:
            raise SettingsError("both listeners are off: enable --grpc or --http")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SettingsError("TLS needs both --tls-cert and --tls-key")
        for path, what in ((self.tls_cert, "cert"), (self.tls_key, "key")):
            if path is not None and not path.is_file():
                raise SettingsError(f"{src.get(what, 'TLS ' + what)}: no such file {path}")
        if self.config_path is not None and not self.config_path.is_file():
            raise SettingsError(f"{src.get('config', '--config')}: no such file {self.config_path}")
        if self.auth_token is not None and (
            not self.auth_token.isprintable() or " " in self.auth_token
        ):
            raise SettingsError(f"{src.get('token', '--auth-token')}: token must be one word")
        if self.log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise SettingsError(
                f"log level must be DEBUG, INFO, WARNING or ERROR: {self.log_level}"
            )
        if self.log_format not in ("text", "json"):
            raise SettingsError(
                f"--log-format / {ENV_LOG_FORMAT}: expected text or json, got {self.log_format!r}"
            )
        if self.max_batch_spans > self.max_queued_spans:
            raise SettingsError("--max-batch-spans cannot exceed --max-queued-spans")
        if self.db_call_deadline_s <= self.db_statement_timeout_s:
            raise SettingsError(
                "--db-call-deadline must be longer than --db-statement-timeout (the server "
                "cancels a slow statement first; only a silent connection is abandoned)"
            )


def _deadlines(num: Callable[[str, str, float, type[float]], float]) -> dict[str, float]:
    """The database deadline settings, read with ``from_args``'s ``num``."""
    return {
        "db_connect_timeout_s": num(
            "db_connect_timeout", ENV_DB_CONNECT_TIMEOUT, DEFAULT_DB_CONNECT_TIMEOUT, float
        ),
        "db_statement_timeout_s": num(
            "db_statement_timeout", ENV_DB_STATEMENT_TIMEOUT, DEFAULT_DB_STATEMENT_TIMEOUT, float
        ),
        "db_lock_timeout_s": num(
            "db_lock_timeout", ENV_DB_LOCK_TIMEOUT, DEFAULT_DB_LOCK_TIMEOUT, float
        ),
        "db_idle_in_transaction_timeout_s": num(
            "db_idle_in_transaction_timeout",
            ENV_DB_IDLE_IN_TRANSACTION_TIMEOUT,
            DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT,
            float,
        ),
        "db_call_deadline_s": num(
            "db_call_deadline", ENV_DB_CALL_DEADLINE, DEFAULT_DB_CALL_DEADLINE, float
        ),
        "health_stuck_after_s": num(
            "health_stuck_after", ENV_HEALTH_STUCK_AFTER, DEFAULT_HEALTH_STUCK_AFTER, float
        ),
    }


def _bool(text: str, source: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{source}: expected true or false, got {text!r}")


def _listen(text: str, source: str) -> Listen | None:
    """Parse HOST:PORT (``[::1]:4317`` for IPv6); ``off`` disables the listener."""
    if text.strip().lower() == OFF:
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise SettingsError(f"{source}: expected HOST:PORT (or 'off'), got {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise SettingsError(f"{source}: port must be a number, got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise SettingsError(f"{source}: port must be between 0 and 65535, got {port}")
    return Listen(host, port)
