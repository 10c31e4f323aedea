"""A database password never appears in any command's output, however malformed its URL.

Every command that takes ``--db`` runs through the real CLI (``toolscore.collector.cli.main``)
with each malformed URL, given by ``--db`` and by ``TOOLSCORE_DB``; stdout and stderr (captured
at the file descriptors, logging included) must not contain the password or any piece of it,
and the command must fail with a message that says what is wrong. ``serve`` also runs as a real
``python -m toolscore serve`` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolscore.collector.cli import main
from toolscore.storage.plumbing.engine import DatabaseUrlError, normalize_url, redact
from toolscore.storage.plumbing.url_safety import url_text, without_password

SECRET = "Sw0rdf1shPa55"
# (URL, pieces of the secret that must not be shown, what the message must say)
MALFORMED: dict[str, tuple[str, tuple[str, ...], str]] = {
    "port-not-a-number": (
        f"postgresql://app:{SECRET}@127.0.0.1:badport/db",
        (SECRET,),
        "the port is not a number",
    ),
    "port-out-of-range": (
        f"postgresql://app:{SECRET}@127.0.0.1:99999999/db",
        (SECRET,),
        "port 99999999 is out of range",
    ),
    "unencoded-at-in-password": (
        f"postgresql://app:{SECRET[:6]}@{SECRET[6:]}@127.0.0.1:5432/db",
        (SECRET[:6], SECRET[6:]),
        "%40",
    ),
    "colon-and-at-in-password": (
        f"postgresql://app:{SECRET[:6]}@{SECRET[6:]}:x@127.0.0.1/db",
        (SECRET[:6], SECRET[6:]),
        "invalid database URL",
    ),
    "query-password-bad-port": (
        f"postgresql://app@127.0.0.1:badport/db?password={SECRET}",
        (SECRET,),
        "the port is not a number",
    ),
    "unsupported-backend": (
        f"mysql://app:{SECRET}@127.0.0.1/db",
        (SECRET,),
        "unsupported database 'mysql'",
    ),
    "not-a-url": (f"postgresql//app:{SECRET}@127.0.0.1/db", (SECRET,), "invalid database URL"),
}

COMMANDS: dict[str, list[str]] = {
    "serve": ["serve", "--grpc", "off", "--http", "127.0.0.1:0", "--no-scoring"],
    "db upgrade": ["db", "upgrade"],
    "db current": ["db", "current"],
    "refs import": ["refs", "import", "REFS"],
    "refs list": ["refs", "list"],
    "refs show": ["refs", "show", "weather"],
    "conversations": ["conversations"],
    "show": ["show", "conv-1"],
    "report": ["report"],
    "export": ["export"],
    "rescore": ["rescore"],
}


def run(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse-style exits
        status = exc.code if isinstance(exc.code, int) else 2
    out, err = capfd.readouterr()
    return status, out + err


@pytest.fixture
def refs_file(tmp_path: Path) -> Path:
    path = tmp_path / "refs.yaml"
    path.write_text(
        "expectations:\n  - id: weather\n    reference_tool_calls:\n      - name: get_weather\n"
    )
    return path


@pytest.mark.parametrize("source", ["flag", "env"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_prints_the_password_of_a_malformed_url(
    command: str,
    case: str,
    source: str,
    refs_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, pieces, says = MALFORMED[case]
    monkeypatch.chdir(tmp_path)  # the default SQLite file, if anything fell back to it
    argv = [str(refs_file) if a == "REFS" else a for a in COMMANDS[command]]
    if source == "flag":
        argv += ["--db", url]
        monkeypatch.delenv("TOOLSCORE_DB", raising=False)
    else:
        monkeypatch.setenv("TOOLSCORE_DB", url)
    status, output = run(argv, capfd)
    assert status != 0, output
    leaked = [p for p in pieces if p in output]
    assert leaked == [], output
    assert says in output, output
    assert not list(tmp_path.glob("*.db")), "nothing fell back to the default database"


def test_serve_process_hides_the_password_from_the_environment(tmp_path: Path) -> None:
    url, pieces, says = MALFORMED["unencoded-at-in-password"]
    env = {**os.environ, "TOOLSCORE_DB": url}
    done = subprocess.run(
        [sys.executable, "-m", "toolscore", "serve", "--grpc", "off", "--http", "127.0.0.1:0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert [p for p in pieces if p in output] == [], output
    assert says in output and "TOOLSCORE_DB" in output, output


class TestUrlText:
    def test_a_well_formed_url_shows_everything_but_the_password(self) -> None:
        assert redact("postgresql://app:pw@db.internal:5432/toolscore") == (
            "postgresql://app:***@db.internal:5432/toolscore"
        )
        assert redact("sqlite:///./toolscore.db") == "sqlite:///./toolscore.db"
        assert redact("postgresql://app@h/db") == "postgresql://app@h/db"

    def test_a_query_password_is_hidden(self) -> None:
        assert redact("postgresql://app@h/db?sslmode=require&password=pw") == (
            "postgresql://app@h/db?sslmode=require&password=***"
        )

    def test_a_password_with_unencoded_at_signs_is_hidden_up_to_the_last_one(self) -> None:
        assert url_text("postgresql://app:a@b@c@h:5432/db") == "postgresql://app:***@h:5432/db"

    def test_text_that_is_not_a_url_is_not_shown(self) -> None:
        assert redact("hunter2") == "<invalid database URL>"

    def test_a_drivers_message_loses_the_password_and_its_pieces(self) -> None:
        url = "postgresql://app:ab%40cdef@h/db"
        message = "failed for 'ab@cdef' (raw ab%40cdef); host 'cdef@h'"
        assert without_password(message, url) == "failed for '***' (raw ***); host '***@h'"


def test_valid_urls_still_normalise() -> None:
    assert normalize_url("postgresql://app:p%40ss@h:5432/db").password == "p@ss"
    assert normalize_url("postgresql://app@h/db").port is None
    with pytest.raises(DatabaseUrlError, match="port 0 is out of range"):
        normalize_url("postgresql://app@h:0/db")
