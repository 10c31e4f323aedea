"""Exit statuses of the real ``toolscore`` command (docs/cli.md, "Exit status").

0: done; 1: the command could not do its work (no database, nothing found, a gate failed, a
file it cannot write); 2: it was asked something it cannot do (a bad flag or variable, an
unreadable input). Every error is one ``toolscore COMMAND: ...`` message, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "examples" / "samples.jsonl"
REFS = ROOT / "examples" / "expectations.yaml"
_SCRIPT = Path(sys.executable).with_name("toolscore")
TOOLSCORE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "toolscore"]

# (command line; {DB} is a migrated database with the examples' expectations, {TMP} a folder),
# environment, exit status, text stderr must hold
CASES: list[tuple[str, dict[str, str], int, str]] = [
    ("refs list --db {DB}", {}, 0, ""),
    ("report --db {DB}", {}, 0, ""),
    ("export --db {DB}", {}, 0, ""),
    (f"score {SAMPLES}", {}, 0, ""),
    (
        "serve --db {DB} --settle x",
        {},
        2,
        "toolscore serve: --settle / TOOLSCORE_SETTLE: expected a number of seconds, got 'x'",
    ),
    (
        "serve --db {DB}",
        {"TOOLSCORE_NO_SCORING": "maybe"},
        2,
        "toolscore serve: --no-scoring / TOOLSCORE_NO_SCORING: expected true or false",
    ),
    (
        "serve --db {DB}",
        {"TOOLSCORE_EXPORT_ENDPOINT": "otel:4317"},
        2,
        "--export-endpoint / TOOLSCORE_EXPORT_ENDPOINT: expected http(s)://host:port, got 'otel",
    ),
    (
        "serve --db {DB} --pass-threshold f1=2",
        {},
        2,
        "--pass-threshold / TOOLSCORE_PASS_THRESHOLDS: expected METRIC=VALUE with VALUE in [0, 1]",
    ),
    ("serve", {"TOOLSCORE_DB": "mysql://h/d"}, 2, "toolscore serve: --db / TOOLSCORE_DB: "),
    (
        "serve --db {DB} --config {TMP}/bad-config.yaml",
        {},
        2,
        "toolscore serve: --config / TOOLSCORE_CONFIG: ",
    ),
    ("db upgrade --db mysql://h/d", {}, 2, "toolscore db upgrade: --db / TOOLSCORE_DB: "),
    ("refs list --db sqlite:///{TMP}/none.db", {}, 1, "toolscore refs list: no database at"),
    ("refs list --db mysql://h/d", {}, 2, "toolscore refs list: --db / TOOLSCORE_DB: "),
    ("refs show nope --db {DB}", {}, 1, "toolscore refs show: no expectation 'nope'"),
    ("refs import {TMP}/bad.yaml --db {DB}", {}, 2, "bad.yaml rejected, nothing imported:"),
    ("conversations --limit 0 --db {DB}", {}, 2, "--limit must be at least 1"),
    ("show nope --db {DB}", {}, 1, "toolscore show: no conversation 'nope'"),
    (
        "show nope --db {DB}",
        {"TOOLSCORE_CONTROL_CALLS": "maybe"},
        2,
        "--control-calls / TOOLSCORE_CONTROL_CALLS",
    ),
    ("report --db {DB} --since 2026-02-01 --until 2026-01-01", {}, 2, "is after --until"),
    ("export --db {DB} --output {TMP}/no/such/dir.csv", {}, 1, "toolscore export: cannot write"),
    ("rescore --db {DB} --resume r-nope", {}, 2, "toolscore rescore: no run 'r-nope'"),
    ("rescore --db {DB} --config {TMP}/none.yaml", {}, 2, "scoring configuration:"),
    ("score {TMP}/none.jsonl", {}, 2, "toolscore score: cannot read"),
    (f"score {SAMPLES} --fail-under tool_call_accuracy=2", {}, 2, "--fail-under: expected METRIC"),
    (f"score {SAMPLES} --fail-under tool_call_accuracy=0.9", {}, 1, "FAIL (fail-under 0.9)"),
    (f"evaluate {SAMPLES} --refs {{TMP}}/none.yaml", {}, 2, "toolscore evaluate: "),
    ("prune --spans-older-than soon --db {DB}", {}, 2, "toolscore prune: --spans-older-than"),
    ("prune --spans-older-than 7d --db sqlite:///{TMP}/none.db", {}, 1, "no database at"),
    ("prune --spans-older-than 7d --db {DB} --dry-run", {}, 0, ""),
    ("no-such-command", {}, 2, "invalid choice"),
]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("statuses")
    (tmp / "bad.yaml").write_text("expectations:\n  - id: x\n")
    (tmp / "bad-config.yaml").write_text("metrics:\n  a:\n    type: no_such_metric\n")
    db = f"sqlite:///{tmp / 'toolscore.db'}"
    done = _run(f"refs import {REFS} --db {db}", {}, {})
    assert done.returncode == 0, done.stderr
    return {"DB": db, "TMP": str(tmp)}


def _run(line: str, env: dict[str, str], place: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for key, value in place.items():
        line = line.replace("{" + key + "}", value)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLSCORE_", "OTEL_"))}
    return subprocess.run(
        [*TOOLSCORE, *line.split()],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("line", "env", "status", "says"), CASES, ids=[c[0] for c in CASES])
def test_exit_status(
    place: dict[str, str], line: str, env: dict[str, str], status: int, says: str
) -> None:
    done = _run(line, env, place)
    assert done.returncode == status, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_closed_stdout_is_quiet(place: dict[str, str]) -> None:
    """``toolscore refs list | head -1`` style: the reader goes away while we write."""
    shell = shutil.which("bash")
    if shell is None:
        pytest.skip("needs bash")
    many = Path(place["TMP"]) / "many.yaml"
    many.write_text(
        "expectations:\n"
        + "".join(
            f"  - id: e-{i:05d}-{'x' * 60}\n    reference_tool_calls: [{{name: f, args: {{}}}}]\n"
            for i in range(3000)
        )
    )
    command = " ".join(TOOLSCORE)
    db = place["DB"]
    assert _run(f"refs import {many} --db {db}", {}, {}).returncode == 0
    samples = Path(place["TMP"]) / "many.jsonl"
    samples.write_text(SAMPLES.read_text() * 500)
    # score says 1: its cut output is lost scores (docs/cli.md)
    for listing, status in ((f"refs list --db {db}", 0), (f"score {samples} --jobs 1", 1)):
        done = subprocess.run(
            [shell, "-c", f"{command} {listing} | head -1; exit ${{PIPESTATUS[0]}}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stderr) == (status, ""), listing
        assert len(done.stdout.splitlines()) == 1
