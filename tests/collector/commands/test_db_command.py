"""``toolscore db upgrade`` / ``db current`` through the real CLI."""

from __future__ import annotations

import pytest

from toolscore.collector.cli import main
from toolscore.storage.migrate import current_revision, head_revision


def test_db_upgrade_then_current(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "current", "--db", db_url]) == 1  # never migrated: behind
    assert "revision none" in capsys.readouterr().out
    assert main(["db", "upgrade", "--db", db_url]) == 0
    assert current_revision(db_url) == head_revision()
    assert main(["db", "current", "--db", db_url]) == 0
    assert "up to date" in capsys.readouterr().out


def test_db_url_from_environment(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOOLSCORE_DB", sqlite_url)
    assert main(["db", "upgrade"]) == 0
    assert current_revision(sqlite_url) == head_revision()


def test_bad_url_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--db", "mysql://u:secret@h/d"]) == 2
    err = capsys.readouterr().err
    assert "unsupported database 'mysql'" in err and "secret" not in err


def test_unreachable_database_hides_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://u:hunter2@127.0.0.1:1/nothing"
    assert main(["db", "upgrade", "--db", url]) == 1
    err = capsys.readouterr().err
    assert "127.0.0.1:1" in err and "hunter2" not in err


def test_a_long_migration_says_what_it_does(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.collector.upkeep.test_retention import conversation
    from tests.storage.old_schema import store_unnumbered
    from toolscore.storage.plumbing.engine import create_engine

    assert main(["db", "upgrade", "--db", db_url, "--revision", "0013"]) == 0
    engine = create_engine(db_url)
    spans, logs = conversation("conv", "a1")
    store_unnumbered(engine, spans, logs, 1)
    engine.dispose()
    capsys.readouterr()
    assert main(["db", "upgrade", "--db", db_url]) == 0
    err = capsys.readouterr().err
    assert "migration 0014: numbering the stored traces: 1 rows" in err, err
    assert f"giving every span its trace's number: {len(spans)} rows" in err, err
