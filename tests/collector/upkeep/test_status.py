"""The server says what it does: backlog gauges on /metrics and one activity line per period."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
import requests
from prometheus_client import CollectorRegistry

from tests.collector.pipeline.e2e import (
    SETTLE_S,
    genai_agent_trace,
    import_refs,
    otlp_provider,
    wait_scored,
)
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.upkeep.status import (
    StatusReporter,
    activity_fields,
    activity_line,
    status_extension,
)
from toolscore.storage.conversations.backlog import Backlog
from toolscore.storage.expectations.repository import ExpectationData

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


def _gauge(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or (line.startswith(name + "{") and "{" not in name):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_gauges_show_the_backlog_and_the_log_line_counts_what_happened(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import_refs(db_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    caplog.set_level(logging.INFO, logger="toolscore.activity")
    # settle long enough to see the conversations wait, then short polls and log periods
    extensions = [
        pipeline_extension(PipelineOptions(settle_s=3 * SETTLE_S, root_idle_s=3 * SETTLE_S)),
        status_extension(poll_s=0.1, log_every_s=0.5),
    ]
    with RunningServer(server_settings(db_url), extensions) as srv:
        provider = otlp_provider(srv)
        for i in range(4):
            genai_agent_trace(
                provider.get_tracer("t"),
                f"status-{i}",
                [WEATHER] if i != 2 else [TIME],  # status-2 calls the wrong tool
                "weather?",
                {"toolscore.reference.id": "w" if i < 3 else "nope"},
            )
        provider.force_flush()
        time.sleep(0.5)
        waiting = requests.get(f"{srv.http_url}/metrics", timeout=5).text
        assert _gauge(waiting, "toolscore_conversations_waiting") == 4
        assert _gauge(waiting, "toolscore_conversations_oldest_waiting_seconds") > 0
        wait_scored(db_url, ["status-0", "status-1", "status-2"])
        time.sleep(1.2)  # a poll and a log period after the scoring
        after = requests.get(f"{srv.http_url}/metrics", timeout=5).text
        provider.shutdown()
    assert _gauge(after, "toolscore_conversations_waiting") == 0
    assert _gauge(after, "toolscore_export_backlog_evaluations") == 0
    by_status = {
        status: _gauge(after, f'toolscore_conversations{{status="{status}"}}')
        for status in ("open", "scored", "unmatched", "error")
    }
    assert by_status == {"open": 0, "scored": 3, "unmatched": 1, "error": 0}
    lines = [r.getMessage() for r in caplog.records if r.name == "toolscore.activity"]
    spans = sum(int(m.split("received ")[1].split(" spans")[0]) for m in lines)
    scored = sum(int(m.split("scored ")[1].split(",")[0]) for m in lines)
    unmatched = sum(int(m.split("unmatched ")[1].split(",")[0]) for m in lines)
    assert (spans, scored, unmatched) == (count_spans(db_url), 3, 1)
    for metric in ("tool_call_accuracy", "tool_call_f1"):
        labels = f'metric="{metric}"'
        assert _gauge(after, f'toolscore_evaluations_total{{label="pass",{labels}}}') == 2
        assert _gauge(after, f'toolscore_evaluations_total{{label="fail",{labels}}}') == 1
        assert _gauge(after, f"toolscore_evaluation_score_count{{{labels}}}") == 3
        assert _gauge(after, f'toolscore_evaluation_score_bucket{{le="0.0",{labels}}}') == 1
    assert all(m.startswith("last 0.5 s: received ") for m in lines)


def count_spans(db_url: str) -> int:
    from tests.integration.serve_harness import count_rows

    return count_rows(db_url)


def test_the_line_names_every_figure() -> None:
    changed = {"spans": 7, "log records": 2, "scored": 1, "unmatched": 0, "failed": 0}
    backlog = Backlog(waiting=4, oldest_waiting_s=12.4, export_pending=3, export_failing=1)
    assert activity_line(changed, backlog, 60, queued=5) == (
        "last 60 s: received 7 spans, 2 log records; conversations scored 1, unmatched 0, "
        "failed 0; ingest queue 5; waiting 4, oldest 12 s; write-back backlog 3"
    )
    assert activity_fields(changed, backlog, 60, queued=5) == {
        "interval_s": 60,
        "spans": 7,
        "log_records": 2,
        "scored": 1,
        "unmatched": 0,
        "failed": 0,
        "ingest_queue": 5,
        "waiting": 4,
        "oldest_waiting_s": 12.4,
        "writeback_backlog": 3,
    }


def test_serve_logs_its_activity_and_exports_the_gauges(sqlite_url: str, tmp_path: Path) -> None:
    import os
    import re
    import subprocess
    import sys

    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    log = tmp_path / "serve.log"
    env = {**os.environ, "TOOLSCORE_LOG_INTERVAL": "0.5"}
    flags = ["--grpc", "off", "--http", "127.0.0.1:0", "--settle", "0.5", "--root-idle", "0.3"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", sqlite_url, *flags],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        url = found.group(1)
        provider = otlp_provider(_Url(url))
        genai_agent_trace(
            provider.get_tracer("t"),
            "serve-status",
            [WEATHER],
            "weather?",
            {"toolscore.reference.id": "w"},
        )
        provider.shutdown()
        wait_scored(sqlite_url, ["serve-status"])
        deadline = time.monotonic() + 20
        while "conversations scored 1" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        metrics = requests.get(f"{url}/metrics", timeout=5).text
    finally:
        proc.terminate()
        proc.wait(30)
    line = next(x for x in log.read_text().splitlines() if "conversations scored 1" in x)
    assert "INFO toolscore.activity: last 0.5 s: received " in line
    assert "toolscore_conversations_waiting 0.0" in metrics


class _Url:
    """What otlp_provider needs of a server: its HTTP URL."""

    def __init__(self, url: str) -> None:
        self.http_url = url


def test_the_count_by_status_never_takes_more_than_a_thousandth_of_the_time() -> None:
    """The count is a scan of ``conversations``, in this process (SQLite) or in the database's
    own (PostgreSQL, where this process only waits): a count that took T seconds either way, T
    past 50 ms, is not repeated within 1,000 (T - 50 ms), however often the backlog is polled."""
    calls: list[float] = []

    def count(took_s: float, in_process: bool) -> dict[str, int]:
        calls.append(time.monotonic())
        if in_process:
            end = time.thread_time() + took_s
            while time.thread_time() < end:  # CPU, as SQLite's scan spends it
                pass
        else:
            time.sleep(took_s)  # waiting, as for PostgreSQL's scan
        return {"scored": len(calls)}

    def polls(took_s: float, in_process: bool, seconds: float) -> int:
        calls.clear()
        reporter = StatusReporter(
            lambda: Backlog(0, None, 0, 0),
            CollectorRegistry(),
            read_counts=lambda: count(took_s, in_process),
            poll_s=0.01,
        )

        async def run() -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await reporter.poll()
                await asyncio.sleep(0.01)

        asyncio.run(run())
        return len(calls)

    assert polls(0.0, True, 1.0) >= 10, "a cheap count follows the polls (every 4th)"
    assert polls(0.01, False, 1.0) >= 10, "a count under 50 ms is not held back"
    assert polls(0.052, True, 1.5) == 1, "2 ms of CPU past 50: the next count waits 2 s"
    assert polls(0.052, False, 1.5) == 1, "2 ms waiting past 50: likewise"
