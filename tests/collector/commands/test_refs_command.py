"""``toolscore refs import|list|show`` end to end: a real process on a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "expectations.yaml"

V1 = """\
expectations:
  - id: weather
    match: {user_input: "Weather in Paris?"}
    reference_tool_calls:
      - {name: get_weather, args: {city: Paris}}
  - id: time
    metrics: [acc]
    reference_tool_calls:
      - {name: get_time, args: {timezone: Asia/Tokyo}}
"""


def toolscore(*args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSCORE_DB"}
    cmd = [sys.executable, "-m", "toolscore", *args]
    if db is not None:
        cmd += ["--db", db]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _listed(db: str) -> dict[str, dict[str, object]]:
    result = toolscore("refs", "list", "--json", db=db)
    assert result.returncode == 0, result.stderr
    return {row["id"]: row for row in json.loads(result.stdout)}


def test_import_list_reimport_and_show_versions(db_url: str, tmp_path: Path) -> None:
    refs = _write(tmp_path, "refs.yaml", V1)

    first = toolscore("refs", "import", str(refs), db=db_url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == f"{refs}: 2 created, 0 updated, 0 unchanged"

    again = toolscore("refs", "import", str(refs), db=db_url)
    assert again.stdout.splitlines() == [f"{refs}: 0 created, 0 updated, 2 unchanged"]

    refs.write_text(V1.replace("city: Paris", "city: Lyon"))
    changed = toolscore("refs", "import", str(refs), db=db_url)
    assert changed.stdout.splitlines() == [
        "updated   weather v2",
        f"{refs}: 0 created, 1 updated, 1 unchanged",
    ]

    listed = _listed(db_url)
    assert {k: v["version"] for k, v in listed.items()} == {"time": 1, "weather": 2}

    table = toolscore("refs", "list", db=db_url)
    header, rule, *rows = table.stdout.splitlines()
    assert header.split() == ["ID", "VERSION", "CALLS", "METRICS", "MATCH", "UPDATED"]
    assert set(rule) <= {"-", " "}
    assert rows[0].split()[:4] == ["time", "1", "1", "acc"]
    assert rows[1].split()[:5] == ["weather", "2", "1", "(all)", 'user_input="Weather']

    latest = toolscore("refs", "show", "weather", db=db_url)
    assert latest.returncode == 0, latest.stderr
    assert "expectation weather  version 2 (latest)" in latest.stdout
    assert 'get_weather(city="Lyon")' in latest.stdout
    assert "versions      1, 2" in latest.stdout

    old = toolscore("refs", "show", "weather", "--version", "1", "--json", db=db_url)
    shown = json.loads(old.stdout)
    assert (shown["version"], shown["is_latest"]) == (1, False)
    assert shown["reference_tool_calls"] == [{"name": "get_weather", "args": {"city": "Paris"}}]


def test_an_invalid_file_is_rejected_whole_and_changes_nothing(db_url: str, tmp_path: Path) -> None:
    toolscore("refs", "import", str(_write(tmp_path, "good.yaml", V1)), db=db_url)
    bad = V1.replace("city: Paris", "city: Rome") + "  - id: broken\n    reference_tool_calls:\n"
    bad += "      - {args: {x: 1}}\n"
    path = _write(tmp_path, "bad.yaml", bad)

    result = toolscore("refs", "import", str(path), db=db_url)

    assert result.returncode == 2
    assert f"{path} rejected, nothing imported" in result.stderr
    assert f"{path}:12: expectations[2].reference_tool_calls[0].name: missing" in result.stderr
    listed = _listed(db_url)
    assert sorted(listed) == ["time", "weather"]
    assert listed["weather"]["version"] == 1


def test_jsonl_errors_name_the_line(sqlite_url: str, tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "samples.jsonl",
        '{"id": "a", "reference_tool_calls": []}\n{"id": "b"}\n',
    )

    result = toolscore("refs", "import", str(path), db=sqlite_url)

    assert result.returncode == 2
    assert f"{path}:2: reference_tool_calls: missing" in result.stderr


def test_the_example_file_imports(sqlite_url: str) -> None:
    result = toolscore("refs", "import", str(EXAMPLE), db=sqlite_url)

    assert result.returncode == 0, result.stderr
    assert "0 updated, 0 unchanged" in result.stdout
    assert len(_listed(sqlite_url)) >= 3


def test_list_and_show_explain_an_empty_or_unmigrated_database(
    sqlite_url: str, tmp_path: Path
) -> None:
    import sqlite3

    sqlite3.connect(sqlite_url.removeprefix("sqlite:///")).close()  # a file with no tables
    for args in (("refs", "list"), ("refs", "show", "x")):
        result = toolscore(*args, db=sqlite_url)
        assert result.returncode == 1
        assert "no expectations table: run `toolscore db upgrade`" in result.stderr

    toolscore("refs", "import", str(_write(tmp_path, "r.yaml", V1)), db=sqlite_url)
    missing = toolscore("refs", "show", "nope", db=sqlite_url)
    assert missing.returncode == 1
    assert "no expectation 'nope'" in missing.stderr
    no_version = toolscore("refs", "show", "time", "--version", "7", db=sqlite_url)
    assert "no expectation 'time' version 7" in no_version.stderr


def test_a_bad_database_url_is_a_usage_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.yaml", V1)

    result = toolscore("refs", "import", str(path), db="mysql://u:secret@h/d")

    assert result.returncode == 2
    assert "unsupported database" in result.stderr
    assert "secret" not in result.stderr


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_format_flag_overrides_the_suffix(sqlite_url: str, tmp_path: Path, fmt: str) -> None:
    record = {"id": "a", "reference_tool_calls": [{"name": "f", "args": {}}]}
    text = json.dumps([record]) if fmt == "json" else json.dumps(record)
    path = _write(tmp_path, "refs.txt", text)

    result = toolscore("refs", "import", str(path), "--format", fmt, db=sqlite_url)

    assert result.returncode == 0, result.stderr
    assert list(_listed(sqlite_url)) == ["a"]


def test_config_rejects_metric_names_it_does_not_define(sqlite_url: str, tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        "scoring.yaml",
        "metrics:\n  acc: {type: tool_call_accuracy}\n  f1: {type: tool_call_f1}\n",
    )
    unknown = _write(tmp_path, "r.yaml", V1.replace("metrics: [acc]", "metrics: [acc, loose]"))

    rejected = toolscore("refs", "import", str(unknown), "--config", str(config), db=sqlite_url)
    accepted = toolscore(
        "refs",
        "import",
        str(_write(tmp_path, "ok.yaml", V1)),
        "--config",
        str(config),
        db=sqlite_url,
    )

    assert rejected.returncode == 2
    assert "metrics[1]: unknown metric instance 'loose' (configured: acc, f1)" in rejected.stderr
    assert accepted.returncode == 0, accepted.stderr
    assert _listed(sqlite_url)["time"]["metrics"] == ["acc"]


def test_an_invalid_config_is_reported(sqlite_url: str, tmp_path: Path) -> None:
    config = _write(tmp_path, "scoring.yaml", "metrics:\n  acc: {type: tool_call_precision}\n")

    result = toolscore(
        "refs",
        "import",
        str(_write(tmp_path, "r.yaml", V1)),
        "--config",
        str(config),
        db=sqlite_url,
    )

    assert result.returncode == 2
    assert str(config) in result.stderr and "metrics.acc" in result.stderr
