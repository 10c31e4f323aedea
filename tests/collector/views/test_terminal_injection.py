"""Hostile span values reach the operator's terminal, spreadsheet and browser escaped.

A conversation id, tool name, argument value, user message and expectation id carry terminal
escapes (clear screen, window title, colour, CR overwrite, C1 CSI, DEL), bidi overrides, CSV
formula prefixes and a ``<script>`` tag. They travel the real way: ``toolscore refs import`` of
a JSON file, then real OTel SDK spans over OTLP/HTTP to a real ``toolscore serve`` pipeline (on a
SQLite file and on PostgreSQL) which scores them. Every reading command then runs as a real
``python -m toolscore`` process, and its stdout and stderr must hold no control character but
the newlines of its own layout, and show the escaped forms.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.collector.pipeline.e2e import (
    genai_agent_trace,
    otlp_provider,
    pipeline_server,
    wait_scored,
)
from toolscore.storage.migrate import upgrade

ESC_CLEAR = "\x1b[2J"
ESC_TITLE = "\x1b]0;pwned\x07"
C1_CSI = "\x9b31m"
RLO = "\u202e"
# Starts with '=' (a spreadsheet formula); ends with the <script> the HTML report must not run.
CONVERSATION = (
    f'=HYPERLINK("http://evil.invalid","ok"){ESC_CLEAR}{ESC_TITLE}\rALL SCORES PASS'
    f"{RLO}txt.exe{C1_CSI}\x7f<script>alert(1)</script>"
)
# How the terminal shows it (written out, not computed by the code under test).
SHOWN_CONVERSATION = (
    '=HYPERLINK("http://evil.invalid","ok")\\x1b[2J\\x1b]0;pwned\\x07'
    "\\rALL SCORES PASS\\u202etxt.exe\\x9b31m\\x7f<script>alert(1)</script>"
)
EXPECTATION = f"+weather{ESC_CLEAR}{RLO}\u2066{C1_CSI}"  # '+': a formula too
TOOL = f"get_weather{ESC_TITLE}\x1b[31m"
CITY = f"Paris\r\n{ESC_CLEAR}{C1_CSI}"
WRONG_CITY = f"-Lyon{ESC_TITLE}"  # the reference disagrees: the score fails, the report lists it
QUESTION = f"Weather?{ESC_CLEAR}\rALL SCORES PASS{RLO}"

# What a terminal must never receive from a value (independent of the code under test): C0 but
# the layout's own newline, DEL, C1, bidi embeddings/overrides/isolates/marks.
_C0 = "".join(chr(c) for c in range(0x20) if c != 0x0A)
RAW_CONTROL = re.compile(f"[{re.escape(_C0)}\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Scored:
    url: str
    refs_import: subprocess.CompletedProcess[bytes]
    tmp: Path


def toolscore(*args: str, db: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSCORE_DB"}
    return subprocess.run(
        [sys.executable, "-m", "toolscore", *args, "--db", db],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def terminal_text(data: bytes) -> str:
    """Output as the terminal gets it: valid UTF-8 with no raw control or bidi character."""
    text = data.decode("utf-8")  # strict: a lone surrogate or stray byte fails here
    found = sorted({f"U+{ord(c):04X}" for c in RAW_CONTROL.findall(text)})
    assert not found, f"raw control characters reached the terminal: {found}\n{text!r}"
    return text


def _refs_file(tmp: Path) -> Path:
    path = tmp / "refs.json"
    ref = [
        {
            "id": EXPECTATION,
            "reference_tool_calls": [{"name": TOOL, "args": {"city": WRONG_CITY}}],
            "match": {"conversation_id": CONVERSATION},
        }
    ]
    path.write_text(json.dumps(ref), encoding="utf-8")
    return path


def _scored(url: str, tmp: Path) -> Scored:
    upgrade(url)
    imported = toolscore("refs", "import", str(_refs_file(tmp)), db=url)
    assert imported.returncode == 0, imported.stderr
    with pipeline_server(url) as srv:
        provider = otlp_provider(srv)
        tracer = provider.get_tracer("hostile.agent")
        genai_agent_trace(tracer, CONVERSATION, [{"name": TOOL, "args": {"city": CITY}}], QUESTION)
        provider.shutdown()
        wait_scored(url, [CONVERSATION])
    return Scored(url, imported, tmp)


def _postgres_database() -> Iterator[str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = os.environ.get("TOOLSCORE_TEST_POSTGRES_URL")
    if not server:
        pytest.skip("PostgreSQL test skipped: set TOOLSCORE_TEST_POSTGRES_URL to run it")
    admin = make_url(server)
    name = f"toolscore_t_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def scored(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scored]:
    """One database per backend for the module: the commands below only read it."""
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "sqlite":
        yield _scored(f"sqlite:///{tmp / 'toolscore.db'}", tmp)
        return
    for url in _postgres_database():
        yield _scored(url, tmp)


def test_the_pipeline_stored_the_hostile_values_exactly(scored: Scored) -> None:
    result = toolscore("show", CONVERSATION, "--json", db=scored.url)

    data = json.loads(terminal_text(result.stdout))  # JSON escapes them: \u001b, \u009b, \u202e
    assert data["conversation"]["id"] == CONVERSATION
    assert data["expectation"]["id"] == EXPECTATION
    assert [(c["name"], c["arguments"]) for c in data["tool_calls"]] == [(TOOL, {"city": CITY})]
    assert data["messages"][0]["content"] == QUESTION
    assert "\\u001b[2J" in result.stdout.decode() and "\\u202e" in result.stdout.decode()


def test_refs_import_prints_the_id_escaped(scored: Scored) -> None:
    out = terminal_text(scored.refs_import.stdout)
    terminal_text(scored.refs_import.stderr)
    assert out.splitlines()[0] == "created   +weather\\x1b[2J\\u202e\\u2066\\x9b31m v1"


def test_conversations_table_shows_escapes_and_keeps_its_lines(scored: Scored) -> None:
    result = toolscore("conversations", db=scored.url)

    assert result.returncode == 0
    lines = terminal_text(result.stdout).splitlines()
    assert len(lines) == 3  # header, rule, one row: the id's \r\n did not add or overwrite lines
    cell = SHOWN_CONVERSATION[:47] + "…"  # the escaped id, cut to the 48-column cell
    assert lines[2].startswith(cell + "  scored  ")
    assert lines[1].startswith("-" * 48 + "  ")  # the rule measured the escaped cell
    assert "+weather\\x1b[2J\\u202e\\u2066\\x9b31m@1" in lines[2]


def test_show_escapes_every_span_value(scored: Scored) -> None:
    result = toolscore("show", CONVERSATION, db=scored.url)

    assert result.returncode == 0
    out = terminal_text(result.stdout)
    lines = out.splitlines()
    assert lines[0] == f"conversation {SHOWN_CONVERSATION}"
    assert "  expectation     +weather\\x1b[2J\\u202e\\u2066\\x9b31m@1" in lines
    assert any(line.startswith("  human  Weather?\\x1b[2J") for line in lines)
    # tool name escaped like text, argument values as JSON escapes
    call = 'get_weather\\x1b]0;pwned\\x07\\x1b[31m(city="Paris\\r\\n\\u001b[2J\\u009b31m")'
    assert f"         -> {call}" in lines
    assert not any(line.startswith("ALL SCORES PASS") for line in lines)


def test_errors_on_stderr_are_escaped_too(scored: Scored) -> None:
    result = toolscore("show", f"nope{ESC_CLEAR}\r{RLO}", db=scored.url)

    assert result.returncode == 1
    assert terminal_text(result.stdout) == ""
    expected = "toolscore show: no conversation 'nope\\x1b[2J\\r\\u202e'\n"
    assert terminal_text(result.stderr) == expected


def test_refs_list_and_show(scored: Scored) -> None:
    listed = toolscore("refs", "list", db=scored.url)
    shown = toolscore("refs", "show", EXPECTATION, db=scored.url)

    assert listed.returncode == shown.returncode == 0
    rows = terminal_text(listed.stdout).splitlines()
    assert len(rows) == 3 and rows[2].startswith("+weather\\x1b[2J\\u202e\\u2066\\x9b31m  1 ")
    out = terminal_text(shown.stdout)
    assert out.startswith("expectation +weather\\x1b[2J\\u202e\\u2066\\x9b31m  version 1")
    assert '  1. get_weather\\x1b]0;pwned\\x07\\x1b[31m(city="-Lyon\\u001b]0;pwned\\u0007")' in out


def test_report_terminal_and_html(scored: Scored) -> None:
    html_path = scored.tmp / "report.html"
    result = toolscore(
        "report", "--since", "2000-01-01", "--until", "2100-01-01", "--html", str(html_path),
        db=scored.url,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    out = terminal_text(result.stdout)
    terminal_text(result.stderr)
    assert "+weather\\x1b[2J\\u202e\\u2066\\x9b31m" in out  # the summary row
    worst = out.split("Worst conversations", 1)[1]
    assert '=HYPERLINK("http://evil.invalid","ok")\\x1b[2J' in worst
    page = html_path.read_text(encoding="utf-8")
    assert "<script>" not in page
    assert "=HYPERLINK(&quot;http://evil.invalid&quot;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert RAW_CONTROL.search(page) is None  # no bidi override reorders what the browser shows
    assert "\\u202etxt.exe" in page


def test_csv_export_neutralises_formulas_and_escapes_controls(scored: Scored) -> None:
    result = toolscore("export", "--format", "csv", db=scored.url)

    assert result.returncode == 0
    out = terminal_text(result.stdout)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 == len(out.splitlines()) - 1  # one line per evaluation
    for row in rows:
        assert row["conversation_id"].startswith("'=HYPERLINK(")  # text, not a formula
        assert "\\x1b[2J" in row["conversation_id"]
        assert row["expectation_id"] == "'+weather\\x1b[2J\\u202e\\u2066\\x9b31m"
        float(row["score"])  # a number stays a number: no quote before it
        assert not row["score"].startswith("'")
        assert json.loads(row["metric_config"])  # JSON columns: still JSON, exact values
    # the reasons quote the hostile tool name; the JSON column carries it exactly
    [accuracy] = [json.loads(r["details"]) for r in rows if r["metric"] == "tool_call_accuracy"]
    assert accuracy["pairs"][0]["name"] == TOOL
    assert accuracy["reasons"][0].startswith(f"expected {TOOL}(city=")


def test_jsonl_export_keeps_exact_values_with_escapes(scored: Scored) -> None:
    result = toolscore("export", "--format", "jsonl", db=scored.url)

    assert result.returncode == 0
    rows = [json.loads(line) for line in terminal_text(result.stdout).splitlines()]
    assert [(r["conversation_id"], r["expectation_id"]) for r in rows] == [
        (CONVERSATION, EXPECTATION)
    ] * 2


def test_conversations_json_keeps_exact_values(scored: Scored) -> None:
    result = toolscore("conversations", "--json", db=scored.url)

    assert result.returncode == 0
    [row] = json.loads(terminal_text(result.stdout))
    assert (row["id"], row["expectation_id"]) == (CONVERSATION, EXPECTATION)
