"""The README's quickstart, run as a user would: ``toolscore serve``, ``toolscore refs import``, the
example agent, ``toolscore conversations``, then docs/schema.md's SQL on the same database."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import text

from tests.collector.pipeline.e2e import wait_scored
from toolscore.storage.plumbing.engine import create_engine

ROOT = Path(__file__).resolve().parents[2]
TOOLSCORE = [sys.executable, "-m", "toolscore"]
CONVERSATIONS = ["demo-weather-1", "demo-time-1", "demo-forecast-1"]


def run(
    *args: str, db_url: str, stdin: str | None = None, **environ: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLSCORE_DB": db_url, **environ}
    return subprocess.run(
        [*args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def serve(db_url: str) -> Iterator[tuple[str, str]]:
    """``toolscore serve`` with the web UI, on free ports; yields their base URLs."""
    env = {**os.environ, "TOOLSCORE_DB": db_url}
    args = ["--grpc", "off", "--http", "127.0.0.1:0", "--settle", "1", "--ui", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*TOOLSCORE, "serve", *args],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url = ui = None
    deadline = time.monotonic() + 60
    lines = []
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        lines.append(line)
        found = re.search(r"OTLP/HTTP on (http://[\d.]+:\d+)", line)
        url = found.group(1) if found else None
        shown = re.search(r"web UI on (http://[\d.]+:\d+)/", line)
        ui = ui or (shown.group(1) if shown else None)
    assert url and ui, f"serve did not start: {''.join(lines)}"
    try:
        yield url, ui
    finally:
        proc.terminate()
        proc.wait(30)


def equivalent_samples() -> list[dict[str, Any]]:
    """The Ragas samples of the three conversations, from the agent's script and the YAML."""
    sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
    try:
        import agent
    finally:
        sys.path.pop(0)
    refs = yaml.safe_load((ROOT / "examples" / "expectations.yaml").read_text())["expectations"]
    by_id = {r["id"]: r for r in refs}
    expectation_of = {
        "demo-weather-1": "weather-and-time",
        "demo-time-1": "time-tokyo",
        "demo-forecast-1": "forecast-berlin",
    }
    samples = []
    for question, conv_id in agent.CONVERSATIONS:
        calls = [{"name": n, "args": a} for n, a in agent.SCRIPT[question]]
        messages = [
            {"type": "human", "content": question},
            {"type": "ai", "content": "", "tool_calls": calls},
            *({"type": "tool", "content": "ok"} for _ in calls),
            {"type": "ai", "content": "answer"},
        ]
        ref = by_id[expectation_of[conv_id]]
        samples.append(
            {
                "id": conv_id,
                "user_input": messages,
                "reference_tool_calls": ref["reference_tool_calls"],
            }
        )
    return samples


def readme_sql(dialect: str) -> list[str]:
    """The statements of docs/schema.md's example queries that apply to ``dialect``, with their
    example date replaced by a week ago (so "since a date" means something whatever today is)."""
    week_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=7)).date().isoformat()
    schema_doc = (ROOT / "docs" / "schema.md").read_text()
    section = schema_doc.split("## Example queries", 1)[1].split("\n## ", 1)[0]
    statements = []
    for block in re.findall(r"```sql\n(.*?)```", section, flags=re.S):
        first = block.lstrip().splitlines()[0].strip()
        if first in ("-- SQLite", "-- PostgreSQL") and first != f"-- {dialect}":
            continue
        block = re.sub(r"'\d{4}-\d{2}-\d{2}'", f"'{week_ago}'", block)
        statements += [s.strip() for s in block.split(";") if s.strip()]
    return statements


@pytest.mark.slow
def test_quickstart_end_to_end(db_url: str, serve: tuple[str, str]) -> None:
    otlp, ui = serve
    imported = run(*TOOLSCORE, "refs", "import", "examples/expectations.yaml", db_url=db_url)
    assert imported.returncode == 0, imported.stderr
    # as the README says: the agent finds toolscore through the standard OTel variable
    agent = run(
        sys.executable,
        "examples/quickstart/agent.py",
        db_url=db_url,
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp,
    )
    assert agent.returncode == 0, agent.stderr
    wait_scored(db_url, CONVERSATIONS, timeout_s=60)

    listed = run(*TOOLSCORE, "conversations", "--json", db_url=db_url)
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    rows = shown if isinstance(shown, list) else shown["conversations"]
    assert {r["id"] if "id" in r else r["conversation_id"] for r in rows} >= set(CONVERSATIONS)

    # the scores equal `toolscore score` on the equivalent Ragas samples
    offline = run(
        *TOOLSCORE,
        "score",
        "--no-details",
        "-",
        db_url=db_url,
        stdin="\n".join(json.dumps(s) for s in equivalent_samples()),
    )
    assert offline.returncode == 0, offline.stderr
    expected = {d.pop("id"): d for d in map(json.loads, offline.stdout.splitlines())}
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            got: dict[str, dict[str, float]] = {}
            for conv, metric, score in conn.execute(
                text("SELECT conversation_id, metric, score FROM evaluations WHERE is_current")
            ):
                got.setdefault(conv, {})[metric] = score
        # time-tokyo names one metric instance: only that one is scored online
        expected["demo-time-1"] = {
            "tool_call_accuracy": expected["demo-time-1"]["tool_call_accuracy"]
        }
        assert got == expected
        assert got["demo-weather-1"]["tool_call_accuracy"] == 1.0
        assert got["demo-forecast-1"]["tool_call_accuracy"] == 0.5

        # every documented query runs on this dialect and finds the quickstart's rows
        dialect = "PostgreSQL" if engine.dialect.name == "postgresql" else "SQLite"
        statements = readme_sql(dialect)
        assert len(statements) == 5
        results = []
        with engine.connect() as conn:
            for sql in statements:
                results.append(conn.execute(text(sql)).all())
        per_day, worst_since, calls, worst_week, next_to_ref = results
        assert {(r[0], r[1]) for r in per_day} >= {("weather-and-time", "tool_call_accuracy")}
        assert worst_since[0][0] == "demo-time-1" and worst_since[0][2] == 0.0
        assert [r[0] for r in worst_week] == [r[0] for r in worst_since]
        assert [(r[0], r[1]) for r in calls] == [(0, "get_time")]
        assert _json(calls[0][2]) == {"timezone": "Tokyo"}
        assert [(_json(r[2]), _json(r[3])) for r in next_to_ref] == [
            (
                {"city": "Berlin", "days": 5},
                {"name": "get_forecast", "args": {"city": "Berlin", "days": 3}},
            )
        ]
    finally:
        engine.dispose()

    # as the README says: the web UI shows the failing call beside the reference's
    with urllib.request.urlopen(f"{ui}/conversation?id=demo-forecast-1", timeout=30) as page:
        html = page.read().decode()
    side = html[html.index('class="side-by-side"') :]
    assert "<mark>days</mark>" in side and "<code>5</code>" in side and "<code>3</code>" in side


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
