"""Every ``serve`` flag: the flag beats its variable, which beats the default; bad values name both.

One row per flag, written out by hand (flag, variable, a flag value, a variable value, and what
each gives in the resolved configuration), so a renamed variable or a changed default fails here;
a flag without a row fails ``test_every_serve_flag_has_a_row``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.serve_config import ServeConfig, load_serve_config, serve_options
from toolscore.collector.settings import Listen

ENDPOINT = {"TOOLSCORE_EXPORT_ENDPOINT": "http://otel:4317"}


@dataclass(frozen=True)
class Row:
    flag: str
    variable: str
    flag_text: str | None  # None: a switch
    env_text: str
    get: Callable[[ServeConfig], Any]
    from_flag: Any
    from_env: Any
    default: Any
    bad: str | None = None  # a value the flag and the variable refuse
    base_env: tuple[tuple[str, str], ...] = ()


def _export(attribute: str) -> Callable[[ServeConfig], Any]:
    return lambda c: None if c.export is None else getattr(c.export, attribute)


ROWS = [
    Row(
        "--db",
        "TOOLSCORE_DB",
        "sqlite:///f.db",
        "sqlite:///e.db",
        lambda c: c.settings.db_url,
        "sqlite:///f.db",
        "sqlite:///e.db",
        "sqlite:///./toolscore.db",
        bad="mysql://h/d",
    ),
    Row(
        "--grpc",
        "TOOLSCORE_GRPC",
        "127.0.0.1:0",
        "off",
        lambda c: c.settings.grpc,
        Listen("127.0.0.1", 0),
        None,
        Listen("127.0.0.1", 4317),
        bad="4317",
    ),
    Row(
        "--http",
        "TOOLSCORE_HTTP",
        "off",
        "[::1]:9",
        lambda c: c.settings.http,
        None,
        Listen("::1", 9),
        Listen("127.0.0.1", 4318),
        bad="h:x",
    ),
    Row(
        "--config",
        "TOOLSCORE_CONFIG",
        "f.yaml",
        "e.yaml",
        lambda c: c.settings.config_path,
        Path("f.yaml"),
        Path("e.yaml"),
        None,
        bad="missing.yaml",
    ),
    Row(
        "--no-upgrade",
        "TOOLSCORE_UPGRADE",
        None,
        "0",
        lambda c: c.settings.upgrade,
        False,
        False,
        True,
        bad="maybe",
    ),
    Row(
        "--tls-cert",
        "TOOLSCORE_TLS_CERT",
        "f.pem",
        "e.pem",
        lambda c: c.settings.tls_cert,
        Path("f.pem"),
        Path("e.pem"),
        None,
        bad="missing.pem",
        base_env=(("TOOLSCORE_TLS_KEY", "k.pem"),),
    ),
    Row(
        "--tls-key",
        "TOOLSCORE_TLS_KEY",
        "f.pem",
        "e.pem",
        lambda c: c.settings.tls_key,
        Path("f.pem"),
        Path("e.pem"),
        None,
        bad="missing.pem",
        base_env=(("TOOLSCORE_TLS_CERT", "k.pem"),),
    ),
    Row(
        "--auth-token",
        "TOOLSCORE_AUTH_TOKEN",
        "f",
        "e",
        lambda c: c.settings.auth_token,
        "f",
        "e",
        None,
        bad="two words",
    ),
    Row(
        "--max-request-bytes",
        "TOOLSCORE_MAX_REQUEST_BYTES",
        "1000",
        "2_000",
        lambda c: c.settings.max_request_bytes,
        1000,
        2000,
        64 * 1024 * 1024,
        bad="0",
    ),
    Row(
        "--max-attribute-bytes",
        "TOOLSCORE_MAX_ATTRIBUTE_BYTES",
        "100",
        "200",
        lambda c: c.settings.max_attribute_bytes,
        100,
        200,
        65536,
        bad="1.5",
    ),
    Row(
        "--max-queued-spans",
        "TOOLSCORE_MAX_QUEUED_SPANS",
        "30000",
        "40000",
        lambda c: c.settings.max_queued_spans,
        30000,
        40000,
        100000,
        bad="-1",
    ),
    Row(
        "--max-batch-spans",
        "TOOLSCORE_MAX_BATCH_SPANS",
        "500",
        "600",
        lambda c: c.settings.max_batch_spans,
        500,
        600,
        20000,
        bad="many",
    ),
    Row(
        "--max-concurrent-requests",
        "TOOLSCORE_MAX_CONCURRENT_REQUESTS",
        "3",
        "8",
        lambda c: c.settings.max_concurrent_requests,
        3,
        8,
        64,
        bad="0",
    ),
    Row(
        "--retry-after",
        "TOOLSCORE_RETRY_AFTER",
        "2",
        "3",
        lambda c: c.settings.retry_after_s,
        2.0,
        3.0,
        1.0,
        bad="soon",
    ),
    Row(
        "--shutdown-grace",
        "TOOLSCORE_SHUTDOWN_GRACE",
        "4",
        "5",
        lambda c: c.settings.shutdown_grace_s,
        4.0,
        5.0,
        10.0,
        bad="0",
    ),
    Row(
        "--log-level",
        "TOOLSCORE_LOG_LEVEL",
        "debug",
        "warning",
        lambda c: c.settings.log_level,
        "DEBUG",
        "WARNING",
        "INFO",
        bad="loud",
    ),
    Row(
        "--log-format",
        "TOOLSCORE_LOG_FORMAT",
        "text",
        "JSON",
        lambda c: c.settings.log_format,
        "text",
        "json",
        "text",
        bad="yaml",
    ),
    Row(
        "--log-interval",
        "TOOLSCORE_LOG_INTERVAL",
        "6",
        "7",
        lambda c: c.settings.log_interval_s,
        6.0,
        7.0,
        60.0,
        bad="x",
    ),
    Row(
        "--db-connect-timeout",
        "TOOLSCORE_DB_CONNECT_TIMEOUT",
        "3",
        "4",
        lambda c: c.settings.db_connect_timeout_s,
        3.0,
        4.0,
        10.0,
        bad="-2",
    ),
    Row(
        "--db-statement-timeout",
        "TOOLSCORE_DB_STATEMENT_TIMEOUT",
        "7",
        "8",
        lambda c: c.settings.db_statement_timeout_s,
        7.0,
        8.0,
        15.0,
        bad="x",
    ),
    Row(
        "--db-lock-timeout",
        "TOOLSCORE_DB_LOCK_TIMEOUT",
        "2",
        "3",
        lambda c: c.settings.db_lock_timeout_s,
        2.0,
        3.0,
        10.0,
        bad="0",
    ),
    Row(
        "--db-idle-in-transaction-timeout",
        "TOOLSCORE_DB_IDLE_IN_TRANSACTION_TIMEOUT",
        "9",
        "8",
        lambda c: c.settings.db_idle_in_transaction_timeout_s,
        9.0,
        8.0,
        60.0,
        bad="x",
    ),
    Row(
        "--db-call-deadline",
        "TOOLSCORE_DB_CALL_DEADLINE",
        "30",
        "25",
        lambda c: c.settings.db_call_deadline_s,
        30.0,
        25.0,
        20.0,
        bad="x",
    ),
    Row(
        "--health-stuck-after",
        "TOOLSCORE_HEALTH_STUCK_AFTER",
        "1",
        "2",
        lambda c: c.settings.health_stuck_after_s,
        1.0,
        2.0,
        10.0,
        bad="x",
    ),
    Row(
        "--settle",
        "TOOLSCORE_SETTLE",
        "2.5",
        "9",
        lambda c: c.pipeline.settle_s,
        2.5,
        9.0,
        5.0,
        bad="x",
    ),
    Row(
        "--replay-window",
        "TOOLSCORE_REPLAY_WINDOW",
        "0",
        "60",
        lambda c: c.pipeline.replay_window_s,
        0.0,
        60.0,
        3600.0,
        bad="soon",
    ),
    Row(
        "--backpressure-lag",
        "TOOLSCORE_BACKPRESSURE_LAG",
        "0",
        "1.5",
        lambda c: c.pipeline.backpressure_lag_s,
        0.0,
        1.5,
        0.5,
        bad="-1",
    ),
    Row(
        "--backpressure-max-hold",
        "TOOLSCORE_BACKPRESSURE_MAX_HOLD",
        "4",
        "1",
        lambda c: c.pipeline.backpressure_max_hold_s,
        4.0,
        1.0,
        2.0,
        bad="later",
    ),
    Row(
        "--root-idle",
        "TOOLSCORE_ROOT_IDLE",
        "0",
        "0.5",
        lambda c: c.pipeline.root_idle_s,
        0.0,
        0.5,
        1.0,
        bad="-1",
    ),
    Row(
        "--conversation-key",
        "TOOLSCORE_CONVERSATION_KEYS",
        "a",
        "b, c",
        lambda c: c.pipeline.conversation_keys,
        ("a",),
        ("b", "c"),
        None,
    ),
    Row(
        "--reference-key",
        "TOOLSCORE_REFERENCE_KEY",
        "f",
        "e",
        lambda c: c.pipeline.reference_key,
        "f",
        "e",
        None,
    ),
    Row(
        "--scoring-in-process",
        "TOOLSCORE_SCORING_IN_PROCESS",
        None,
        "true",
        lambda c: c.pipeline.separate_process,
        False,
        False,
        True,
        bad="maybe",
    ),
    Row(
        "--scoring-processes",
        "TOOLSCORE_SCORING_PROCESSES",
        "3",
        "2",
        lambda c: c.pipeline.scoring_processes,
        3,
        2,
        None,
        bad="0",
    ),
    Row(
        "--control-calls",
        "TOOLSCORE_CONTROL_CALLS",
        "include",
        "exclude include=handoff",
        lambda c: c.pipeline.control_calls,
        ControlCalls(include=True),
        ControlCalls(include=False, overrides=(("handoff", True),)),
        ControlCalls(include=False),
        bad="maybe",
    ),
    Row(
        "--span-retention",
        "TOOLSCORE_SPAN_RETENTION",
        "12h",
        "2w",
        lambda c: c.retention.retention_s,
        12 * 3600.0,
        14 * 86400.0,
        7 * 86400.0,
        bad="soon",
    ),
    Row(
        "--history-retention",
        "TOOLSCORE_HISTORY_RETENTION",
        "30d",
        "60d",
        lambda c: c.retention.history_s,
        30 * 86400.0,
        60 * 86400.0,
        None,
        bad="later",
    ),
    Row(
        "--span-retention-interval",
        "TOOLSCORE_SPAN_RETENTION_INTERVAL",
        "5",
        "6",
        lambda c: c.retention.interval_s,
        5.0,
        6.0,
        60.0,
        bad="0",
    ),
    Row(
        "--ui",
        "TOOLSCORE_UI",
        "127.0.0.1:8080",
        "0.0.0.0:9000",
        lambda c: c.ui,
        Listen("127.0.0.1", 8080),
        Listen("0.0.0.0", 9000),
        None,
        bad="nowhere",
    ),
    Row(
        "--max-conversation-spans",
        "TOOLSCORE_MAX_CONVERSATION_SPANS",
        "10",
        "20",
        lambda c: c.pipeline.max_conversation_spans,
        10,
        20,
        500_000,
        bad="0",
    ),
    Row(
        "--no-scoring",
        "TOOLSCORE_NO_SCORING",
        None,
        "1",
        lambda c: c.pipeline.enabled,
        False,
        False,
        True,
        bad="2",
    ),
    Row(
        "--export-endpoint",
        "TOOLSCORE_EXPORT_ENDPOINT",
        "http://f:4317",
        "https://e:4317",
        _export("traces_endpoint"),
        "http://f:4317",
        "https://e:4317",
        None,
        bad="otel:4317",
    ),
    Row(
        "--export-traces-endpoint",
        "TOOLSCORE_EXPORT_TRACES_ENDPOINT",
        "http://f:4317",
        "https://e:4317",
        _export("traces_endpoint"),
        "http://f:4317",
        "https://e:4317",
        "http://otel:4317",
        bad="otel:4317",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--export-logs-endpoint",
        "TOOLSCORE_EXPORT_LOGS_ENDPOINT",
        "http://f:4317",
        "https://e:4317",
        _export("logs_endpoint"),
        "http://f:4317",
        "https://e:4317",
        "http://otel:4317",
        bad="otel:4317",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--export-signals",
        "TOOLSCORE_EXPORT_SIGNALS",
        "traces",
        "logs",
        _export("signals"),
        ("traces",),
        ("logs",),
        ("traces", "logs"),
        bad="metrics",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--export-protocol",
        "TOOLSCORE_EXPORT_PROTOCOL",
        "grpc",
        "http/protobuf",
        _export("protocol"),
        "grpc",
        "http/protobuf",
        "grpc",
        bad="http/json",
        base_env=(*ENDPOINT.items(), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")),
    ),
    Row(
        "--export-header",
        "TOOLSCORE_EXPORT_HEADERS",
        "a=1",
        "b=2,c=3",
        _export("headers"),
        (("a", "1"),),
        (("b", "2"), ("c", "3")),
        (),
        bad="novalue",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--export-headers-file",
        "TOOLSCORE_EXPORT_HEADERS_FILE",
        "f.headers",
        "e.headers",
        _export("headers"),
        (("f", "1"),),
        (("e", "1"),),
        (),
        bad="missing.headers",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--export-compression",
        "TOOLSCORE_EXPORT_COMPRESSION",
        "none",
        "gzip",
        _export("compression"),
        "none",
        "gzip",
        "none",
        bad="zstd",
        base_env=(*ENDPOINT.items(), ("OTEL_EXPORTER_OTLP_COMPRESSION", "none")),
    ),
    Row(
        "--export-timeout",
        "TOOLSCORE_EXPORT_TIMEOUT",
        "3",
        "4",
        _export("timeout_s"),
        3.0,
        4.0,
        10.0,
        bad="soon",
        base_env=tuple(ENDPOINT.items()),
    ),
    Row(
        "--pass-threshold",
        "TOOLSCORE_PASS_THRESHOLDS",
        "x=0.5",
        "y=0.25, z=1",
        lambda c: c.thresholds,
        {"x": 0.5},
        {"y": 0.25, "z": 1.0},
        {},
        bad="x=2",
    ),
    Row(
        "--annotate",
        "TOOLSCORE_ANNOTATE",
        "phoenix=http://f:6006",
        "phoenix=http://e:6006,phoenix=http://g:6006",
        lambda c: tuple(t.key for t in c.annotate),
        ("phoenix=http://f:6006",),
        ("phoenix=http://e:6006", "phoenix=http://g:6006"),
        (),
        bad="jaeger=http://j:16686",
    ),
    Row(
        "--no-export",
        "TOOLSCORE_NO_EXPORT",
        None,
        "yes",
        lambda c: c.export is None,
        True,
        True,
        False,
        bad="maybe",
        base_env=tuple(ENDPOINT.items()),
    ),
]
IDS = [row.flag for row in ROWS]


@pytest.fixture(autouse=True)
def _files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files the rows name, in the working directory."""
    monkeypatch.chdir(tmp_path)
    for name in ("f.yaml", "e.yaml", "f.pem", "e.pem", "k.pem"):
        Path(name).write_text("x")
    Path("f.headers").write_text("f=1\n")
    Path("e.headers").write_text("# comment\ne=1\n")


def _load(argv: list[str], env: dict[str, str]) -> ServeConfig:
    return load_serve_config(build_parser().parse_args(["serve", *argv]), env)


def _flag(row: Row, text: str | None) -> list[str]:
    return [row.flag] if text is None else [row.flag, text]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_flag_beats_the_variable(row: Row) -> None:
    env = {**dict(row.base_env), row.variable: row.env_text}
    assert row.get(_load(_flag(row, row.flag_text), env)) == row.from_flag


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_variable_beats_the_default(row: Row) -> None:
    env = {**dict(row.base_env), row.variable: row.env_text}
    assert row.get(_load([], env)) == row.from_env


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_default_applies_without_either(row: Row) -> None:
    base = {k: v for k, v in row.base_env if not k.startswith("TOOLSCORE_TLS_")}  # both or none
    assert row.get(_load([], {**base, row.variable: "  "})) == row.default


@pytest.mark.parametrize("row", [r for r in ROWS if r.bad is not None], ids=lambda r: r.flag)
def test_a_bad_value_names_the_flag_and_the_variable(row: Row) -> None:
    assert row.bad is not None
    prefix = f"{row.flag} / {row.variable}"
    attempts = [([], {**dict(row.base_env), row.variable: row.bad})]
    if row.flag_text is not None:
        attempts.append(([row.flag, row.bad], dict(row.base_env)))
    for argv, env in attempts:
        with pytest.raises(ConfigError) as caught:
            _load(argv, env)
        message = str(caught.value)
        assert message.startswith(prefix), message
        if row.flag in ("--auth-token", "--export-header", "--annotate"):
            assert row.bad not in message  # secrets are never quoted
        elif "file" not in message and "no such" not in message:
            assert f"got {row.bad!r}" in message or row.bad in message, message


@pytest.mark.parametrize("row", [r for r in ROWS if r.flag_text is None], ids=lambda r: r.flag)
@pytest.mark.parametrize(
    ("text", "given"),
    [(t, True) for t in ("1", "true", "YES", "on")]
    + [(t, False) for t in ("0", "false", "No", "off")],
)
def test_switch_variables_read_true_and_false(row: Row, text: str, given: bool) -> None:
    config = _load([], {**dict(row.base_env), row.variable: text})
    if row.flag == "--no-upgrade":  # TOOLSCORE_UPGRADE names the setting, not the flag
        given = not given
    assert row.get(config) == (row.from_flag if given else row.default)


def test_every_serve_flag_has_a_row() -> None:
    parser = build_parser(only="toolscore.collector.commands.serve")
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = {s for a in serve._actions for s in a.option_strings if s.startswith("--")}
    assert flags - {"--help"} == set(IDS)
    declared = {option.flag: option.variable for option in serve_options()}
    assert declared == {row.flag: row.variable for row in ROWS}
    # every serve flag has a variable of toolscore's own (the OTEL_ ones come after it)
    assert all((variable or "").startswith("TOOLSCORE_") for variable in declared.values())


def test_otel_variables_refine_the_write_back_after_toolscore_ones() -> None:
    otel = {
        **ENDPOINT,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    }
    export = _load([], otel).export
    assert export is not None
    assert (export.protocol, export.timeout_s, export.compression) == ("http/protobuf", 2.5, "gzip")
    export = _load([], {**otel, "TOOLSCORE_EXPORT_TIMEOUT": "7"}).export
    assert export is not None and export.timeout_s == 7.0
    with pytest.raises(ConfigError, match="--export-timeout / OTEL_EXPORTER_OTLP_TIMEOUT: exp"):
        _load([], {**otel, "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"})
    # the endpoint agents use to reach toolscore never turns the write-back on
    assert _load([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4317"}).export is None


def test_history_retention_must_be_at_least_the_span_retention() -> None:
    with pytest.raises(ConfigError) as caught:
        _load(["--history-retention", "3d"], {})  # spans: 7d by default
    assert str(caught.value) == (
        "--history-retention / TOOLSCORE_HISTORY_RETENTION: 3d is shorter than "
        "--span-retention / TOOLSCORE_SPAN_RETENTION (7d): the history retention must be at "
        "least the span retention"
    )
    with pytest.raises(ConfigError, match="TOOLSCORE_HISTORY_RETENTION: 1h is shorter"):
        _load(["--span-retention", "2h"], {"TOOLSCORE_HISTORY_RETENTION": "1h"})
    same = _load(["--span-retention", "2h", "--history-retention", "2h"], {}).retention
    assert (same.retention_s, same.history_s) == (7200.0, 7200.0)
    alone = _load(["--span-retention", "forever", "--history-retention", "1h"], {}).retention
    assert (alone.retention_s, alone.history_s) == (None, 3600.0)


def test_cross_field_errors_name_every_flag_and_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        _load(["--grpc", "off"], {"TOOLSCORE_HTTP": "off"})
    assert "--grpc / TOOLSCORE_GRPC" in str(caught.value)
    assert "--http / TOOLSCORE_HTTP" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        _load(["--max-batch-spans", "9"], {"TOOLSCORE_MAX_QUEUED_SPANS": "8"})
    assert str(caught.value).startswith(
        "--max-batch-spans / TOOLSCORE_MAX_BATCH_SPANS (9) cannot exceed "
        "--max-queued-spans / TOOLSCORE_MAX_QUEUED_SPANS (8)"
    )
