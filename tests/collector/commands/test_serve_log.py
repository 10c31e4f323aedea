"""``serve --log-format json``: what a log shipper reads from a real server's stderr.

A real ``toolscore serve`` process (SQLite file and PostgreSQL, a password in the PostgreSQL URL)
receives two agent turns over OTLP/HTTP from the OTel SDK: one scored, one whose reference id
names no expectation. Every line it writes must be one JSON object; the start-up line, the DEBUG
line per conversation outcome and the activity line carry their figures as fields.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import count_rows
from toolscore.storage.expectations.repository import ExpectationData

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
PASSWORD = "s3cret-pw"  # PostgreSQL trusts the test connection: any password is accepted


class _Url:
    def __init__(self, url: str) -> None:
        self.http_url = url


def _records(log: Path) -> list[dict[str, Any]]:
    text = log.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _wait(log: Path, proc: subprocess.Popen[bytes], found: Callable[[list[dict[str, Any]]], bool]):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60
    while not found(records := _records(log)):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    return records


def _with_password(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    return parsed.set(password=PASSWORD).render_as_string(hide_password=False)


def test_json_log_lines_of_a_real_server(db_url: str, tmp_path: Path) -> None:
    url = _with_password(db_url)
    import_refs(url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    log = tmp_path / "serve.log"
    env = {**os.environ, "TOOLSCORE_LOG_FORMAT": "json", "TOOLSCORE_LOG_INTERVAL": "0.5"}
    env.pop("TOOLSCORE_EXPORT_ENDPOINT", None)
    flags = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "DEBUG"]
    flags += ["--settle", "0.5", "--root-idle", "0.3", "--scoring-processes", "1"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", url, *flags],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    try:
        records = _wait(log, proc, lambda rs: any("OTLP/HTTP on" in r["message"] for r in rs))
        start = next(r for r in records if "OTLP/HTTP on" in r["message"])
        http = re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)", start["message"])
        assert http is not None
        provider = otlp_provider(_Url(http.group(1)))
        tracer = provider.get_tracer("t")
        genai_agent_trace(tracer, "log-ok", [WEATHER], "weather?", {"toolscore.reference.id": "w"})
        genai_agent_trace(tracer, "log-no", [WEATHER], "weather?", {"toolscore.reference.id": "x"})
        provider.shutdown()
        wait_scored(url, ["log-ok", "log-no"])

        def scored_and_reported(rs: list[dict[str, Any]]) -> bool:
            acts = [r for r in rs if r["logger"] == "toolscore.activity"]
            return sum(r["scored"] + r["unmatched"] for r in acts) >= 2

        _wait(log, proc, scored_and_reported)
    finally:
        proc.terminate()
        proc.wait(30)
    records = _records(log)  # every line parses: nothing bypassed the JSON formatter

    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"]) for r in records)
    assert PASSWORD not in log.read_text()
    assert start["level"] == "INFO" and start["logger"] == "toolscore.serve"
    assert start["listeners"].startswith("OTLP/gRPC on 127.0.0.1:")
    assert start["database"] in start["message"]
    assert start["scoring"] == "scoring in 1 process"
    assert start["retention"] == "span retention 7d (pass every 60 s)"  # the default
    assert (start["write-back"], start["tls"], start["auth"]) == ("write-back off", "off", "off")
    assert start["message"].endswith("; write-back off; web UI off; TLS off, auth off")

    outcomes = {
        r["conversation_id"]: r
        for r in records
        if r["level"] == "DEBUG" and r["logger"] == "toolscore.collector.pipeline.worker"
    }
    assert set(outcomes) == {"log-ok", "log-no"}
    assert outcomes["log-ok"]["status"] == "scored" and "reason" not in outcomes["log-ok"]
    assert outcomes["log-no"]["status"] == "unmatched"
    assert outcomes["log-no"]["reason"].startswith("reference id 'x' names no expectation")
    assert all(o["latency_s"] >= 0 for o in outcomes.values())

    acts = [r for r in records if r["logger"] == "toolscore.activity"]
    totals = {k: sum(r[k] for r in acts) for k in ("spans", "scored", "unmatched", "failed")}
    assert totals == {"spans": count_rows(url), "scored": 1, "unmatched": 1, "failed": 0}
    assert all(r["interval_s"] == 0.5 and r["ingest_queue"] >= 0 for r in acts)
    assert all("writeback_backlog" in r and "waiting" in r for r in acts)


def test_a_bad_log_format_is_one_line(sqlite_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolscore", "serve", "--db", sqlite_url],
        capture_output=True,
        text=True,
        env={**os.environ, "TOOLSCORE_LOG_FORMAT": "xml"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "toolscore serve: --log-format / TOOLSCORE_LOG_FORMAT: expected text or json, got 'xml'\n"
    )


_CHILD = """
import logging, os, sys
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.child import ScoringProcess, _child_init
from toolscore.storage import migrate

migrate.upgrade(sys.argv[1])
spec = ScoringProcess(sys.argv[1], log_level="INFO", log_format=sys.argv[2])
_child_init(spec, Timing(), 10, "w1", os.getppid())
logging.getLogger("toolscore.collector.pipeline.worker").warning(
    "from the scoring process", extra={"round": 3}
)
"""


def test_a_scoring_process_logs_in_the_servers_format(sqlite_url: str) -> None:
    """What a scoring child process logs goes through the same formatter (it is spawned: it
    inherits no logging set-up, and would otherwise print bare ``WARNING`` lines)."""
    lines = {}
    for log_format in ("json", "text"):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, sqlite_url, log_format],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        lines[log_format] = done.stderr.strip().splitlines()[-1]
    record = json.loads(lines["json"])
    assert record["message"] == "from the scoring process" and record["round"] == 3
    assert (record["level"], record["logger"]) == ("WARNING", "toolscore.collector.pipeline.worker")
    assert lines["text"].endswith(
        " WARNING toolscore.collector.pipeline.worker: from the scoring process"
    )
