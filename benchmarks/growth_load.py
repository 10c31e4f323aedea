"""The server and the load of ``bench_growth.py``: a real ``toolscore serve`` process, and a
separate process posting OTLP/HTTP requests at a fixed rate, warm-up first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST, connect, paced, post_on
from pipeline_load import payloads as _payloads


class Serve:
    """A real ``toolscore serve`` process on ``url`` (HTTP on a free port, scoring on)."""

    def __init__(self, url: str, retention: str = "forever", scoring: bool = True) -> None:
        self.url = url
        self.retention = retention
        self.scoring = scoring
        self.log = Path(tempfile.mkstemp(prefix="bench-growth-", suffix=".log")[1])

    def __enter__(self) -> Serve:
        flags = ["--grpc", "off", "--http", "127.0.0.1:0", "--settle", "1", "--root-idle", "1"]
        flags += ["--span-retention", self.retention]  # forever: what is grown stays
        flags += [] if self.scoring else ["--no-scoring"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSCORE_")}
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toolscore", "serve", "--db", self.url, *flags],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        deadline = time.monotonic() + 120
        while not (m := re.search(r"OTLP/HTTP on http://127\.0\.0\.1:(\d+)", self.log.read_text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.log.read_text())
            time.sleep(0.2)
        self.port = int(m.group(1))
        return self

    def _children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(c) for c in path.read_text().split()]

    def rss_mb(self) -> tuple[float, float]:
        """Peak RSS (VmHWM) of the server and of its largest child, MB."""

        def hwm(pid: int) -> float:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        return hwm(self.proc.pid), max((hwm(c) for c in self._children()), default=0.0)

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds (user + system) so far of the server and of its child processes."""

        def cpu(pid: int) -> float:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        return cpu(self.proc.pid), sum(cpu(c) for c in self._children())

    def disk_read_bytes(self) -> int:
        """Bytes the server and its child processes have had read from the disk so far."""
        return sum(disk_read_bytes(p) for p in (self.proc.pid, *self._children()))

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.log.unlink(missing_ok=True)


def disk_read_bytes(pid: int) -> int:
    """What process ``pid`` has had read from the disk itself: its page-cache misses (a read
    served from the page cache counts nothing)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise RuntimeError(f"no read_bytes in /proc/{pid}/io")


def post(port: int, body: bytes) -> float:
    """One request on a connection of its own: seconds to its answer (raises unless 200)."""
    conn = connect(port)
    try:
        status, seconds = post_on(conn, body)
    finally:
        conn.close()
    if status != 200:
        raise RuntimeError(f"status {status}")
    return seconds


def load(
    port: int, rate: float, duration: float, prefix: str, result: Any, warmup: float = 0.0
) -> None:
    """Post at ``rate`` spans/s for ``warmup`` then ``duration`` s, without a pause, from 4
    connections; every request's latency, the warm-up's apart. The warm-up's conversations are
    named ``{prefix}w-N``, the measured ones ``{prefix}-N``; ``result["measuring"]`` is set (an
    Event) when the first measured request is due."""
    per_request = SPANS_PER_TRACE * TRACES_PER_REQUEST
    warm = _payloads(f"{prefix}w", int(rate * warmup / per_request)) if warmup > 0 else []
    payloads = warm + _payloads(prefix, max(1, int(rate * duration / per_request)))
    interval = per_request / rate
    measured_from = time.monotonic() + len(warm) * interval

    def on_due(i: int) -> None:
        if i == len(warm):
            result["measuring"].set()

    posted = paced(port, payloads, interval, on_due, persistent=False)
    answered = sorted(posted.latencies.items())
    result.update(
        latencies=[s for i, s in answered if i >= len(warm)],
        warmup=[s for i, s in answered if i < len(warm)],
        failed=posted.failed,
        seconds=time.monotonic() - measured_from,
    )
