"""SQLite on a disk that fills up under load: a real server (default settings) on a SQLite file in
a 24 MiB tmpfs the test mounts (needs root: skipped otherwise). Exports are sent until the disk
is full; every answer is 200 or a retryable 503 (never a 4xx/500 that makes an exporter drop the
data), ``/health`` answers 503 saying the disk is full, every acknowledged span is stored, the
file passes ``PRAGMA integrity_check``, and once space is freed exports are acknowledged again
and ``/health`` answers 200."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import func, select

from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

PB = {"Content-Type": "application/x-protobuf"}
SPANS = 200  # per request, each with a 4,000-byte value: ~0.8 MB a request
FILLER_MB = 6


@contextlib.contextmanager
def small_disk(path: Path, mib: int) -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _request(trace: int) -> bytes:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    # random text: stored values are compressed, so a repeated one would never fill the disk
    value = AnyValue(string_value=base64.b64encode(os.urandom(3000)).decode())
    for i in range(SPANS):
        spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="fill",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes=[KeyValue(key="payload", value=value)],
            )
        )
    return bytes(req.SerializeToString())


def _post(url: str, trace: int) -> int:
    try:
        return requests.post(
            f"{url}/v1/traces", data=_request(trace), headers=PB, timeout=30
        ).status_code
    except requests.RequestException:
        return -1


def test_sqlite_disk_full_under_load_refuses_retryably_and_recovers(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 24) as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * FILLER_MB * 2**20)  # freed later: the space that comes back
        db_url = f"sqlite:///{disk / 'toolscore.db'}"
        answers: Counter[int] = Counter()
        acknowledged: list[int] = []
        with RunningServer(server_settings(db_url)) as srv:
            trace, refused_in_a_row = 0, 0
            while refused_in_a_row < 5 and trace < 400:
                trace += 1
                status = _post(srv.http_url, trace)
                answers[status] += 1
                if status == 200:
                    acknowledged.append(trace)
                    refused_in_a_row = 0
                else:
                    refused_in_a_row += 1
            assert refused_in_a_row == 5, f"the disk never filled: {answers}"
            assert set(answers) <= {200, 503}, answers
            metrics = requests.get(f"{srv.http_url}/metrics", timeout=10).text
            failures = [
                float(line.split()[-1])
                for line in metrics.splitlines()
                if line.startswith("toolscore_ingest_commit_failures_total")
            ]
            assert failures and failures[0] >= 1, "the refused commits are counted"
            health = requests.get(f"{srv.http_url}/health", timeout=10)
            print(f"\nanswers {dict(answers)}; /health while full: {health.text}")
            assert health.status_code == 503, "every write is refused: not healthy"
            assert health.json()["status"] == "unavailable"
            assert "disk is full" in health.json()["reason"], health.json()

            filler.unlink()
            freed_at = time.monotonic()
            recovered = None
            while time.monotonic() - freed_at < 30:
                trace += 1
                if _post(srv.http_url, trace) == 200:
                    acknowledged.append(trace)
                    recovered = time.monotonic() - freed_at
                    break
                time.sleep(0.2)
            assert recovered is not None, "exports were not acknowledged again once space was freed"
            print(f"acknowledged again {recovered:.1f} s after space was freed")
            health = requests.get(f"{srv.http_url}/health", timeout=10)
            assert (health.status_code, health.json()) == (200, {"status": "ok"})

        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
                stored = {
                    int(t, 16)
                    for t in conn.execute(select(spans_table.c.trace_id).distinct()).scalars()
                }
                rows = conn.execute(select(func.count()).select_from(spans_table)).scalar_one()
        finally:
            engine.dispose()
        assert set(acknowledged) <= stored, "an acknowledged export is missing"
        assert rows >= len(acknowledged) * SPANS
