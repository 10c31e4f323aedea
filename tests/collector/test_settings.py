"""`toolscore serve` settings: flags beat environment beat defaults; bad values are errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.settings import Listen, Settings


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_defaults() -> None:
    s = Settings.from_args(_args(), {})
    assert s.db_url == "sqlite:///./toolscore.db"
    assert s.grpc == Listen("127.0.0.1", 4317) and s.http == Listen("127.0.0.1", 4318)
    assert s.upgrade and not s.tls and s.auth_token is None
    assert s.max_request_bytes == 64 * 1024 * 1024
    assert s.max_concurrent_requests == 64


def test_concurrency_cap_from_flag_or_environment() -> None:
    env = {"TOOLSCORE_MAX_CONCURRENT_REQUESTS": "8"}
    assert Settings.from_args(_args(), env).max_concurrent_requests == 8
    s = Settings.from_args(_args("--max-concurrent-requests", "3"), env)
    assert s.max_concurrent_requests == 3


def test_flags_beat_environment_beats_defaults() -> None:
    env = {
        "TOOLSCORE_DB": "postgresql://u@h/d",
        "TOOLSCORE_GRPC": "0.0.0.0:5317",
        "TOOLSCORE_HTTP": "off",
        "TOOLSCORE_MAX_QUEUED_SPANS": "5000",
        "TOOLSCORE_MAX_BATCH_SPANS": "1000",
        "TOOLSCORE_AUTH_TOKEN": "tok",
        "TOOLSCORE_UPGRADE": "false",
    }
    s = Settings.from_args(_args("--grpc", "[::1]:0", "--max-queued-spans", "7000"), env)
    assert s.db_url == "postgresql://u@h/d"
    assert s.grpc == Listen("::1", 0) and str(s.grpc) == "[::1]:0"
    assert s.http is None
    assert (s.max_queued_spans, s.max_batch_spans) == (7000, 1000)
    assert s.auth_token == "tok" and "tok" not in repr(s)
    assert not s.upgrade
    assert not Settings.from_args(_args("--no-upgrade"), {}).upgrade


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["--grpc", "4317"],
            {},
            "--grpc / TOOLSCORE_GRPC: expected HOST:PORT (or 'off'), got '4317'",
        ),
        (["--http", "h:x"], {}, "--http / TOOLSCORE_HTTP: port must be a number, got 'h:x'"),
        ([], {"TOOLSCORE_GRPC": "h:70000"}, "TOOLSCORE_GRPC: port must be between 0 and 65535"),
        (
            ["--max-request-bytes", "0"],
            {},
            "BYTES: expected a whole number greater than 0, got '0'",
        ),
        (
            [],
            {"TOOLSCORE_RETRY_AFTER": "soon"},
            "--retry-after / TOOLSCORE_RETRY_AFTER: expected a number of seconds, got 'soon'",
        ),
        (["--db", "mysql://x/y"], {}, "--db / TOOLSCORE_DB: unsupported database 'mysql'"),
        (["--grpc", "off", "--http", "off"], {}, "both listeners are off"),
        (["--tls-cert", "cert.pem"], {}, "TLS needs both --tls-cert / TOOLSCORE_TLS_CERT and"),
        (["--config", "/nonexistent/s.yaml"], {}, "--config / TOOLSCORE_CONFIG: no such file"),
        ([], {"TOOLSCORE_UPGRADE": "maybe"}, "--no-upgrade / TOOLSCORE_UPGRADE: expected true or"),
        ([], {"TOOLSCORE_LOG_LEVEL": "loud"}, "--log-level / TOOLSCORE_LOG_LEVEL: log level must"),
        (["--max-queued-spans", "10", "--max-batch-spans", "20"], {}, "(20) cannot exceed"),
        (
            ["--max-concurrent-requests", "0"],
            {},
            "--max-concurrent-requests / TOOLSCORE_MAX_CONCURRENT_REQUESTS: expected a whole",
        ),
        (
            [],
            {"TOOLSCORE_MAX_CONCURRENT_REQUESTS": "many"},
            "TOOLSCORE_MAX_CONCURRENT_REQUESTS: expected a whole number greater than 0, got 'many'",
        ),
        ([], {"TOOLSCORE_AUTH_TOKEN": "a b"}, "--auth-token / TOOLSCORE_AUTH_TOKEN: expected one"),
    ],
)
def test_invalid_values_are_reported_with_their_source(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_args(_args(*argv), env)
    assert message in str(caught.value)
    assert "a b" not in str(caught.value)  # a secret is never quoted


def test_missing_tls_file_is_named(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("k")
    with pytest.raises(ConfigError, match="--tls-cert / TOOLSCORE_TLS_CERT: no such file"):
        Settings.from_args(_args("--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(key)), {})
