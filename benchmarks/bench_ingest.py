"""Ingest benchmark: sustained STORED spans/s, request latency and peak RSS of ``toolscore serve``,
with Arize Phoenix measured under the same load in the same run as the peer.

Load: many concurrent OTLP/gRPC exporters sending 512-span requests (the SDK's default batch) of
realistic GenAI agent traces (7 spans each, ~1.5 KB per span with message content). The requests
are serialised before the clock starts, so the load generator spends its CPU on sending, as an
SDK's export thread does. toolscore acknowledges a request only after it is committed, so the
time until the last acknowledgement is the time until every span is stored; the benchmark then
counts the rows to check it. Phoenix acknowledges before storing, so its time is measured until
every span is queryable in its database.

    python benchmarks/bench_ingest.py --runs 3 \
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test \
        --phoenix .venv-phoenix/bin/phoenix
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PCTS = ("p50_ms", "p95_ms", "p99_ms")
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LoadResult:
    seconds: float
    latencies: list[float]
    failures: int


async def _drive(target: str, payloads: Sequence[bytes], concurrency: int) -> LoadResult:
    """``concurrency`` exporters, each with its own channel, sending until the list is empty;
    a refused request is retried after a short pause (as exporters do), so all get stored."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for p in payloads:
        queue.put_nowait(p)
    latencies: list[float] = []
    failures = 0

    async def exporter() -> None:
        nonlocal failures
        async with grpc.aio.insecure_channel(target) as channel:
            call = channel.unary_unary(TRACES)
            while True:
                try:
                    payload = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                while True:
                    t0 = time.perf_counter()
                    try:
                        await call(payload, timeout=60)
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() not in (
                            grpc.StatusCode.UNAVAILABLE,
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                        ):
                            raise
                        failures += 1
                        await asyncio.sleep(0.2)
                        continue
                    latencies.append(time.perf_counter() - t0)
                    break

    started = time.perf_counter()
    await asyncio.gather(*(exporter() for _ in range(concurrency)))
    return LoadResult(time.perf_counter() - started, latencies, failures)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {port}")


def _peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else float("nan")


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


@dataclass(frozen=True)
class RunFigures:
    system: str
    spans: int
    stored: int
    seconds: float
    stored_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    peak_rss_mb: float
    refused_requests: int
    server_cpu_s: float  # CPU the server used while the load ran (independent of other load)

    @property
    def spans_per_cpu_s(self) -> float:
        return self.stored / self.server_cpu_s if self.server_cpu_s else float("nan")


def run_toolscore(
    db_url: str,
    payloads: Sequence[bytes],
    concurrency: int,
    label: str,
    page_size: int | None = None,
    python: str = sys.executable,
) -> RunFigures:
    from sqlalchemy import func, select

    from toolscore.storage.migrate import upgrade
    from toolscore.storage.plumbing.engine import create_engine
    from toolscore.storage.telemetry.spans import spans_table

    if python == sys.executable:  # a baseline's own serve migrates to its own schema
        upgrade(db_url)
    if page_size is not None:  # the A/B peer: the same empty tables with other SQLite pages
        with sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None) as db:
            for pragma in ("journal_mode=DELETE", f"page_size={page_size}", "journal_mode=WAL"):
                db.execute(f"PRAGMA {pragma}")
                if pragma.startswith("page_size"):
                    db.execute("VACUUM")
    workdir = tempfile.mkdtemp(prefix="toolscore-bench-")
    port = _free_port()
    proc = subprocess.Popen(
        [python, "-m", "toolscore", "serve", "--db", db_url, "--grpc", f"127.0.0.1:{port}",
         "--http", "off", "--log-level", "WARNING"] + ["--no-upgrade"] * (python == sys.executable),
        cwd=workdir,  # an empty directory: `-m` puts the cwd first on sys.path
    )  # fmt: skip
    try:
        _wait_port(port)
        time.sleep(1.0)  # let start-up work settle before measuring CPU
        cpu0 = _cpu_s(proc.pid)
        load = asyncio.run(_drive(f"127.0.0.1:{port}", payloads, concurrency))
        cpu = _cpu_s(proc.pid) - cpu0
        rss = _peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
    engine.dispose()
    total = sum(_span_count(p) for p in payloads)
    return RunFigures(label, total, stored, load.seconds, stored / load.seconds,
                      _pct(load.latencies, 0.5), _pct(load.latencies, 0.95),
                      _pct(load.latencies, 0.99), rss, load.failures, cpu)  # fmt: skip


def _span_count(payload: bytes) -> int:
    return sum(len(ss.spans) for rs in ExportTraceServiceRequest.FromString(payload).resource_spans
               for ss in rs.scope_spans)  # fmt: skip


def run_phoenix(
    phoenix: str, payloads: Sequence[bytes], concurrency: int, timeout: float
) -> RunFigures:
    workdir = Path(tempfile.mkdtemp(prefix="phoenix-bench-"))
    grpc_port, http_port = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_GRPC_PORT": str(grpc_port),
           "PHOENIX_PORT": str(http_port), "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    log = open(workdir / "phoenix.log", "w")  # noqa: SIM115 - closed below
    executable = str(Path(phoenix).resolve())
    proc = subprocess.Popen([executable, "serve"], env=env, cwd=workdir, stdout=log, stderr=log)
    total = sum(_span_count(p) for p in payloads)
    try:
        _wait_port(grpc_port, timeout=180)
        _wait_port(http_port, timeout=180)
        time.sleep(1.0)
        cpu0 = _cpu_s(proc.pid)
        started = time.perf_counter()
        load = asyncio.run(_drive(f"127.0.0.1:{grpc_port}", payloads, concurrency))
        db = workdir / "phoenix.db"
        stored = 0
        deadline = started + timeout
        while time.perf_counter() < deadline:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    stored = conn.execute("SELECT count(*) FROM spans").fetchone()[0]
            except sqlite3.Error:
                stored = 0
            if stored >= total:
                break
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        cpu = _cpu_s(proc.pid) - cpu0
        rss = _peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return RunFigures("phoenix (sqlite)", total, stored, seconds, stored / seconds,
                      _pct(load.latencies, 0.5), _pct(load.latencies, 0.95),
                      _pct(load.latencies, 0.99), rss, load.failures, cpu)  # fmt: skip


def _fresh_postgres(admin_url: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = make_url(admin_url)
    name = f"toolscore_bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin.set(database=name).render_as_string(hide_password=False)


def _drop_postgres(url: str, admin_url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(make_url(admin_url), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    engine.dispose()


def _versions(args: argparse.Namespace, run: int) -> list[tuple[str, str]]:
    """This checkout's serve and the --baseline one's, in alternating order from run to run."""
    versions = [("toolscore", sys.executable)]
    if args.baseline:
        versions.append(("baseline", args.baseline))
    return versions if run % 2 == 0 else versions[::-1]


def _run_all(args: argparse.Namespace) -> list[RunFigures]:
    """Every run of every system asked for, in the order run."""
    from benchmarks.ingest_load import build_requests

    results: list[RunFigures] = []
    for run in range(args.runs):
        payloads = build_requests(args.spans, run=run + 1)
        for name, python in _versions(args, run):
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{tmp}/bench.db"
                label = f"{name} (sqlite)"
                results.append(run_toolscore(url, payloads, args.concurrency, label, None, python))
                print(results[-1], flush=True)
        if args.sqlite_page_size:
            with tempfile.TemporaryDirectory() as tmp:
                label = f"toolscore (sqlite, {args.sqlite_page_size}-byte pages)"
                results.append(
                    run_toolscore(
                        f"sqlite:///{tmp}/bench.db",
                        payloads,
                        args.concurrency,
                        label,
                        page_size=args.sqlite_page_size,
                    )
                )
                print(results[-1], flush=True)
        for name, python in _versions(args, run) if args.postgres else ():
            url = _fresh_postgres(args.postgres)
            try:
                label = f"{name} (postgres)"
                results.append(run_toolscore(url, payloads, args.concurrency, label, None, python))
                print(results[-1], flush=True)
            finally:
                _drop_postgres(url, args.postgres)
        if args.phoenix:
            small = build_requests(args.phoenix_spans, run=100 + run)
            results.append(run_phoenix(args.phoenix, small, args.concurrency, args.phoenix_timeout))
            print(results[-1], flush=True)
    return results


def _print_ratios(results: Sequence[RunFigures]) -> None:
    """Median ratios of this checkout to the --baseline version, per database."""
    for system in dict.fromkeys(r.system for r in results if r.system.startswith("toolscore")):
        now = [r for r in results if r.system == system]
        base = [r for r in results if r.system == system.replace("toolscore", "baseline", 1)]
        if base:
            fields = ("stored_per_s", "spans_per_cpu_s", "p99_ms", "peak_rss_mb")
            ratio = {
                f: statistics.median(getattr(r, f) for r in now)
                / statistics.median(getattr(r, f) for r in base)
                for f in fields
            }
            print(f"{system} / baseline: " + ", ".join(f"{f} {v:.2f}x" for f, v in ratio.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_352, help="spans per toolscore run")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent exporters")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="server URL; a fresh database per run")
    parser.add_argument("--phoenix", metavar="PATH", help="the phoenix executable (own venv)")
    parser.add_argument("--phoenix-spans", type=int, default=5_120)
    parser.add_argument("--phoenix-timeout", type=float, default=600)
    parser.add_argument(
        "--baseline", metavar="PYTHON", help="also run serve with this interpreter (an older "
        "version installed), alternating with this checkout's, for a side-by-side A/B"
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write every run's figures as JSON here")
    parser.add_argument(
        "--sqlite-page-size",
        type=int,
        metavar="BYTES",
        help="also measure SQLite files with this page size (A/B against the default)",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # run as a script: make ``benchmarks`` importable
    from benchmarks.ingest_load import BATCH, build_requests

    sample = build_requests(BATCH * 4, run=0)
    span_bytes = sum(map(len, sample)) / (BATCH * 4)
    results = _run_all(args)

    machine = platform.processor() or platform.machine()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nmachine: {machine}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"concurrency {args.concurrency}, {BATCH}-span requests of {span_bytes:,.0f} bytes/span; "
        f"load average {load} at the end"
    )
    print(
        "| system | spans/run | stored spans/s (median) | p50 ms | p95 ms | p99 ms "
        "| peak RSS MB | stored spans per server CPU-second | all stored |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    medians: dict[str, float] = {}
    for system in dict.fromkeys(r.system for r in results):
        rs = [r for r in results if r.system == system]
        med = statistics.median(r.stored_per_s for r in rs)
        medians[system] = med
        p50, p95, p99 = (statistics.median(getattr(r, f) for r in rs) for f in PCTS)
        rss = max(r.peak_rss_mb for r in rs)
        complete = all(r.stored == r.spans for r in rs)
        per_cpu = statistics.median(r.spans_per_cpu_s for r in rs)
        print(
            f"| {system} | {rs[0].spans} | {med:,.0f} | {p50:.0f} | {p95:.0f} | {p99:.0f} "
            f"| {rss:.0f} | {per_cpu:,.0f} | {complete} |"
        )
    peer = medians.get("phoenix (sqlite)")
    if peer:
        for system, med in medians.items():
            if system.startswith("toolscore"):
                print(f"{system}: {med / peer:,.0f}x Phoenix's stored spans/s")
    _print_ratios(results)
    if args.out:
        rows = [{**asdict(r), "spans_per_cpu_s": r.spans_per_cpu_s} for r in results]
        args.out.write_text(json.dumps(rows, indent=2))
    return 0 if all(r.stored == r.spans for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
