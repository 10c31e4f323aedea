"""The ``serve:`` section of the ``--config`` file: flags > environment > file > defaults.

Rows for options of each kind (a number, a listener, a repeatable flag, switches, a write-back
option with an ``OTEL_`` variable after it, a retention duration), the errors a file can hold
(unknown key, wrong shape, bad value: each names the key and the file, exit status 2), the
complete example of docs/configuration.md read by the same parser, and a real ``toolscore
serve --config`` taking its ports and database from the file.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolscore.collector.cli import build_parser, main
from toolscore.collector.configuration import ConfigError, read_section
from toolscore.collector.serve_config import ServeConfig, load_serve_config, serve_options
from toolscore.collector.settings import CONFIG, Listen
from toolscore.scorer.config import load_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
ENDPOINT = {"TOOLSCORE_EXPORT_ENDPOINT": "http://otel:4317"}


@dataclass(frozen=True)
class Row:
    key: str  # the file's key (the flag without --)
    flag: list[str]
    env: tuple[str, str]
    file_text: str  # the YAML value
    get: Callable[[ServeConfig], Any]
    from_flag: Any
    from_env: Any
    from_file: Any
    default: Any
    base_env: tuple[tuple[str, str], ...] = ()


def _export_timeout(config: ServeConfig) -> Any:
    return None if config.export is None else config.export.timeout_s


ROWS = [
    Row(
        "settle",
        ["--settle", "1"],
        ("TOOLSCORE_SETTLE", "2"),
        "3",
        lambda c: c.pipeline.settle_s,
        1.0,
        2.0,
        3.0,
        5.0,
    ),
    Row(
        "grpc",
        ["--grpc", "127.0.0.1:1"],
        ("TOOLSCORE_GRPC", "127.0.0.1:2"),
        "off",  # read as the flag's text, not as YAML's false
        lambda c: c.settings.grpc,
        Listen("127.0.0.1", 1),
        Listen("127.0.0.1", 2),
        None,
        Listen("127.0.0.1", 4317),
    ),
    Row(
        "conversation-key",
        ["--conversation-key", "f"],
        ("TOOLSCORE_CONVERSATION_KEYS", "e1,e2"),
        "[file.a, file.b]",
        lambda c: c.pipeline.conversation_keys,
        ("f",),
        ("e1", "e2"),
        ("file.a", "file.b"),
        None,
    ),
    Row(
        "no-scoring",
        ["--no-scoring"],
        ("TOOLSCORE_NO_SCORING", "0"),  # the variable says "not given": it still beats the file
        "true",
        lambda c: c.pipeline.enabled,
        False,
        True,
        False,
        True,
    ),
    Row(
        "no-upgrade",
        ["--no-upgrade"],
        ("TOOLSCORE_UPGRADE", "1"),
        "yes",
        lambda c: c.settings.upgrade,
        False,
        True,
        False,
        True,
    ),
    Row(
        "export-timeout",
        ["--export-timeout", "3"],
        ("TOOLSCORE_EXPORT_TIMEOUT", "4"),
        "5",
        _export_timeout,
        3.0,
        4.0,
        5.0,
        2.5,  # OTEL_EXPORTER_OTLP_TIMEOUT, read after the file
        base_env=(*ENDPOINT.items(), ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")),
    ),
    Row(
        "span_retention",  # underscores work as well as dashes
        ["--span-retention", "1d"],
        ("TOOLSCORE_SPAN_RETENTION", "2d"),
        "3d",
        lambda c: c.retention.retention_s,
        86400.0,
        172800.0,
        259200.0,
        604800.0,
    ),
]
IDS = [row.key for row in ROWS]


def _load(argv: list[str], env: dict[str, str]) -> ServeConfig:
    return load_serve_config(build_parser().parse_args(["serve", *argv]), env)


def _file(tmp_path: Path, serve: str, name: str = "toolscore.yaml") -> Path:
    path = tmp_path / name
    path.write_text("metrics:\n  tool_call_f1: {type: tool_call_f1}\nserve:\n" + serve)
    return path


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_flag_beats_variable_beats_file_beats_default(row: Row, tmp_path: Path) -> None:
    path = _file(tmp_path, f"  {row.key}: {row.file_text}\n")
    with_file = {**dict(row.base_env), "TOOLSCORE_CONFIG": str(path)}
    with_env = {**with_file, row.env[0]: row.env[1]}
    assert row.get(_load(row.flag, with_env)) == row.from_flag
    assert row.get(_load([], with_env)) == row.from_env
    assert row.get(_load([], with_file)) == row.from_file
    assert row.get(_load(["--config", str(path)], dict(row.base_env))) == row.from_file
    assert row.get(_load([], dict(row.base_env))) == row.default


def test_the_config_flag_beats_the_config_variable(tmp_path: Path) -> None:
    flag = _file(tmp_path, "  settle: 7\n", "flag.yaml")
    env = _file(tmp_path, "  settle: 8\n", "env.yaml")
    config = _load(["--config", str(flag)], {"TOOLSCORE_CONFIG": str(env)})
    assert config.pipeline.settle_s == 7.0
    assert config.settings.config_path == flag


@pytest.mark.parametrize(
    ("serve", "message"),
    [
        ("  setle: 3\n", "serve.setle in {path}: unknown key: did you mean settle?"),
        ("  config: other.yaml\n", "serve.config in {path}: unknown key"),
        ("  --settle: 3\n", "serve.--settle in {path}: unknown key"),
        ("  settle: [1, 2]\n", "--settle / serve.settle in {path}: expected one value, got a list"),
        ("  grpc: {host: h}\n", "--grpc / serve.grpc in {path}: expected one value, got a mapping"),
        (
            "  settle: soon\n",
            "--settle / serve.settle in {path}: expected a number of seconds, got 'soon'",
        ),
        (
            "  max_batch_spans: many\n",
            "--max-batch-spans / serve.max_batch_spans in {path}: expected",
        ),
        (
            "  no-scoring: maybe\n",
            "--no-scoring / serve.no-scoring in {path}: expected true or false",
        ),
        (
            "  pass-threshold: [{a: 1}]\n",
            "--pass-threshold / serve.pass-threshold in {path}: expected a list",
        ),
        ("  settle: 1\n  settle: 2\n", "serve.settle in {path}: given twice"),
        (
            "  max-batch-spans: 1\n  max_batch_spans: 2\n",
            "serve.max_batch_spans in {path}: given twice",
        ),
        ("  - settle\n", "serve in {path}: expected a mapping of option names to values"),
        ("  settle: [unclosed\n", "{path}: invalid YAML"),
    ],
)
def test_file_errors_name_the_key_and_the_file(tmp_path: Path, serve: str, message: str) -> None:
    path = _file(tmp_path, serve)
    with pytest.raises(ConfigError) as caught:
        _load(["--config", str(path)], {})
    assert str(caught.value).startswith(message.format(path=path)), str(caught.value)


def test_a_secret_from_the_file_is_never_quoted(tmp_path: Path) -> None:
    path = _file(tmp_path, "  auth-token: two words\n")
    with pytest.raises(ConfigError) as caught:
        _load(["--config", str(path)], {})
    assert str(caught.value).startswith(f"--auth-token / serve.auth-token in {path}: expected")
    assert "two words" not in str(caught.value)


def test_an_unknown_key_exits_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "  max-spans: 3\n")
    assert main(["serve", "--config", str(path)]) == 2
    assert f"serve.max-spans in {path}: unknown key" in capsys.readouterr().err


def test_empty_values_and_a_missing_section_leave_the_defaults(tmp_path: Path) -> None:
    assert _load(["--config", str(_file(tmp_path, "  settle:\n"))], {}).pipeline.settle_s == 5.0
    empty = tmp_path / "empty.yaml"
    empty.write_text("metrics:\n  tool_call_f1: {type: tool_call_f1}\nserve:\n")
    assert _load(["--config", str(empty)], {}).pipeline.settle_s == 5.0


def test_a_file_of_server_options_only_scores_with_the_built_in_instances(tmp_path: Path) -> None:
    path = tmp_path / "serve-only.yaml"
    path.write_text("serve:\n  settle: 2\n")
    assert list(load_config(path).instances) == ["tool_call_accuracy", "tool_call_f1"]
    assert _load(["--config", str(path)], {}).pipeline.settle_s == 2.0


def _doc_example() -> str:
    text = DOC.read_text()
    section = text[text.index("## One file for a deployment") :]
    found = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert found is not None, "docs/configuration.md: the example file is missing"
    return found.group(1)


def test_the_documented_file_is_complete_and_read_by_the_parser(tmp_path: Path) -> None:
    example = _doc_example()
    path = tmp_path / "toolscore.yaml"
    path.write_text(example)
    assert list(load_config(path).instances) == ["tool_call_accuracy", "tool_call_f1"]
    config = _load(["--config", str(path)], {})
    assert config.thresholds == {"tool_call_accuracy": 1.0, "tool_call_f1": 0.8}
    assert config.settings.grpc == Listen("127.0.0.1", 4317)
    assert config.retention.retention_s == 604800.0
    serve = example[example.index("\nserve:\n") :]
    set_keys = re.findall(r"^  ([a-z][a-z-]*):", serve, re.M)
    commented = re.findall(r"^  # ([a-z][a-z-]*):", serve, re.M)
    options = [option for option in serve_options() if option is not CONFIG]
    read = read_section(path, "serve", options).values
    assert sorted(read) == sorted(key.replace("-", "_") for key in set_keys)
    assert {*set_keys, *commented} == {option.flag.removeprefix("--") for option in options}, (
        "every serve option appears in the example, set or commented, and nothing else"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_real_serve_takes_its_ports_and_database_from_the_file(tmp_path: Path) -> None:
    grpc_port, http_port = _free_port(), _free_port()
    db = tmp_path / "from-file.db"
    path = _file(
        tmp_path,
        f"  db: sqlite:///{db}\n  grpc: 127.0.0.1:{grpc_port}\n  http: 127.0.0.1:{http_port}\n"
        "  no-scoring: true\n  log-level: WARNING\n",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSCORE_")}
    env["TOOLSCORE_LOG_LEVEL"] = "INFO"  # the environment beats the file: the start-up line shows
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 60
        while f"127.0.0.1:{http_port}" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/health", timeout=10) as answer:
            assert answer.status == 200
        socket.create_connection(("127.0.0.1", grpc_port), timeout=10).close()
        assert db.is_file()
        assert not (tmp_path / "toolscore.db").exists()
    finally:
        proc.terminate()
        proc.wait(30)
