"""The ``toolscore`` entry point: version, usage status, and a reader that closes the pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "TOOLSCORE_DB"}


def _run(shell_line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shell_line,
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    refs = tmp_path / "many.yaml"
    refs.write_text(
        "expectations:\n"
        + "".join(
            f"  - id: expectation-{i:05d}-{'x' * 40}\n"
            f"    reference_tool_calls: [{{name: get_weather, args: {{city: Paris}}}}]\n"
            for i in range(3000)
        )
    )
    db = f"sqlite:///{tmp_path / 't.db'}"
    toolscore = f"{sys.executable} -m toolscore"
    imported = _run(f"{toolscore} refs import {refs} --db {db}")
    assert imported.returncode == 0, imported.stderr
    # 3,000 rows are far more than a pipe buffers: the command is still writing when head exits
    listed = _run(f"{toolscore} refs list --db {db} | head -1; exit ${{PIPESTATUS[0]}}")
    assert listed.stderr == ""
    assert listed.returncode == 0
    assert len(listed.stdout.splitlines()) == 1


def test_version_and_usage_statuses() -> None:
    version = _run(f"{sys.executable} -m toolscore --version")
    assert version.returncode == 0 and version.stdout.startswith("toolscore ")
    bare = _run(f"{sys.executable} -m toolscore")
    assert bare.returncode == 2 and "usage: toolscore" in bare.stderr
    unknown = _run(f"{sys.executable} -m toolscore no-such-command")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_a_port_in_use_is_one_line_and_status_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = f"sqlite:///{tmp_path / 't.db'}"
        toolscore = f"{sys.executable} -m toolscore serve --db {db} --no-scoring"
        for flags, name in (
            (f"--grpc off --http 127.0.0.1:{port}", "OTLP/HTTP"),
            (f"--http off --grpc 127.0.0.1:{port}", "OTLP/gRPC"),
        ):
            result = _run(f"{toolscore} {flags} --log-level WARNING")
            assert result.returncode == 1
            assert "Traceback" not in result.stderr
            assert result.stderr.strip().splitlines() == [
                f"toolscore serve: cannot listen: {name} on 127.0.0.1:{port}: "
                "address already in use"
            ], result.stderr


def test_read_only_commands_never_create_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    for command in ("conversations", "show some-id", "report", "export", "refs list"):
        result = _run(f"{sys.executable} -m toolscore {command} --db sqlite:///{missing}")
        assert result.returncode in (1, 2), (command, result.stderr)
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.endswith(
            f"no database at {missing}: `toolscore serve` or `toolscore db upgrade` creates it"
        )
        assert not missing.exists(), command
