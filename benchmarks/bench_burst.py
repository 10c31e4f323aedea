"""A burst of matched conversations sent as fast as ``serve`` acknowledges them; how long scoring
takes to catch up, and how the scoring rate moves with scoring processes and ``serve`` processes.

Each ``toolscore serve`` app is the one of ``bench_pipeline.py`` (receiver and pipeline, scoring in
child processes); the load (``pipeline_load.py``: 7-span GenAI agent traces, one conversation
each, every one matching an expectation, 73 a request) posts from 4 connections per server with
no pacing, so the send rate is what the server acknowledges. With two servers (``--servers 2``,
PostgreSQL only) each gets half the conversations from its own load process. Reported per run:

- ingest: spans/s from the first request to the last acknowledgement;
- scoring: conversations/s between the first and the last evaluation row written, and the lag
  from the last acknowledgement to the moment a reader polling the database (every 50 ms) sees
  every conversation scored (the burst target: <= settle + 1 s). The last row's ``created_at``
  is also shown: it is stamped before the write transaction (its wait for the write lock and
  its commit come after), so it says less than what a user sees;
- at the last acknowledgement, the conversations not scored yet, and of those the ready ones
  (quiet for the settle time): a scoring backlog, not conversations still settling;
- CPU seconds per process type (server, scoring processes, the client while it sends, and on
  PostgreSQL the database's backends of the run) per stored span and per scored conversation.

    python benchmarks/bench_burst.py --conversations 30000 --settle 2          # SQLite
    python benchmarks/bench_burst.py --conversations 30000 --settle 2 --grpc   # gRPC, 8 in flight
    python benchmarks/bench_burst.py --grpc --backpressure-lag 0.5,0   # backpressure on vs off
    python benchmarks/bench_burst.py --conversations 15000 --scoring-processes 2 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/NAME_bench --servers 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make ``benchmarks`` importable

from benchmarks.bench_pipeline import _prepare, _Server  # noqa: E402
from benchmarks.burst_load import GRPC_IN_FLIGHT, send_grpc, send_http  # noqa: E402
from benchmarks.pipeline_load import SPANS_PER_TRACE  # noqa: E402


def _cpu_of(pid: int) -> tuple[int, float]:
    """(parent pid, CPU seconds) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float]]:
    out = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            out[int(entry.name)] = _cpu_of(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _run_wait(pid: int) -> float:
    """Seconds a process's threads have waited for a CPU while runnable (/proc schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _serve(
    db_url: str, settle: float, processes: int | None, pipeline: dict[str, Any], conn: Any
) -> None:
    """A second ``serve`` app in a process of its own, until told to stop."""
    with _Server(db_url, settle, True, processes, pipeline=pipeline) as server:
        conn.send(server.app.http_port)
        conn.recv()


@dataclass
class Burst:
    conversations: int = 0
    spans: int = 0
    ingest_spans_per_s: float = 0.0
    scored: int = 0
    scored_per_s: float = 0.0
    lag_s: float = 0.0  # last acknowledgement -> every evaluation row visible (what users see)
    stamped_lag_s: float = 0.0  # last acknowledgement -> the last row's created_at
    failed: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # process type -> CPU seconds
    scoring_wait_s: float = 0.0  # scoring processes: runnable, waiting for a CPU
    scoring_busy_s: float = 0.0  # first to last evaluation row
    unscored: int = 0  # at the last acknowledgement; of those, ready (quiet for the settle):
    ready: int = 0


def _wait_scored(
    db_url: str, prefixes: list[str], expected: int, timeout: float, settle: float
) -> Any:
    """Poll as a reader would until every conversation is scored. Called once every request was
    acknowledged (so every conversation row exists): while some of the run's conversations are
    still pending, the poll counts them through the pending rows' partial index (a scan of the
    whole table every 50 ms would take CPU from the scoring it waits for, in the server's own
    process); then it checks that every one has a scored revision. The first poll also says how
    many were not scored yet and how many of those were ready (quiet for ``settle``)."""
    from sqlalchemy import func, or_, select, true

    from toolscore.storage.conversations.tables import conversations, evaluations
    from toolscore.storage.plumbing.engine import create_engine

    engine = create_engine(db_url)
    c, e = conversations.c, evaluations.c
    mine = or_(*(c.id.like(f"{p}-%") for p in prefixes))
    deadline = time.monotonic() + timeout
    seen_at = float("nan")
    with engine.connect() as conn:
        quiet_since = time.time_ns() - int(settle * 1e9)
        backlog = conn.execute(
            select(func.count(), func.count().filter(c.last_span_received_ns <= quiet_since)).where(
                c.needs_scoring == true(), mine
            )
        ).one()
        conn.rollback()
        while time.monotonic() < deadline:
            pending = conn.execute(
                select(func.count()).where(c.needs_scoring == true(), mine)
            ).scalar_one()
            conn.rollback()
            if pending:
                time.sleep(0.05)
                continue
            done = conn.execute(
                select(func.count()).where(mine, c.revision >= 1, c.needs_scoring.is_(False))
            ).scalar_one()
            conn.rollback()
            if done >= expected:
                seen_at = time.time()  # committed and visible to a reader: what a user sees
                break
            time.sleep(0.05)
        row = conn.execute(
            select(func.count(func.distinct(e.conversation_id)), func.min(e.created_at))
            .add_columns(func.max(e.created_at))
            .join(conversations, e.conversation_id == c.id)
            .where(mine)
        ).one()
    engine.dispose()
    return (*row, seen_at, *backlog)


def _pg_backends(db_url: str) -> list[int]:
    from sqlalchemy import text

    from toolscore.storage.plumbing.engine import create_engine

    engine = create_engine(db_url)
    with engine.connect() as conn:
        pids = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        ).scalars()
        out = list(pids)
    engine.dispose()
    return out


def _options(lag: float | None) -> dict[str, Any]:
    return {} if lag is None else {"backpressure_lag_s": lag}


def run_once(db_url: str, conversations: int, settle: float, processes: int | None,
             servers: int, use_grpc: bool = False, lag: float | None = None) -> Burst:  # fmt: skip
    ctx = mp.get_context("spawn")
    me = os.getpid()
    with (
        ctx.Manager() as manager,
        _Server(db_url, settle, True, processes, grpc=use_grpc, pipeline=_options(lag)) as first,
    ):
        others, ports = [], [first.app.grpc_port if use_grpc else first.app.http_port]
        for _ in range(servers - 1):
            here, there = ctx.Pipe()
            proc = ctx.Process(
                target=_serve, args=(db_url, settle, processes, _options(lag), there)
            )
            proc.start()
            ports.append(here.recv())
            others.append((proc, here))
        time.sleep(3)  # scoring children start (imports) before the clock starts
        prefixes = [f"b{uuid.uuid4().hex[:8]}" for _ in ports]
        results = [manager.dict() for _ in ports]
        loads = [
            ctx.Process(
                target=send_grpc if use_grpc else send_http,
                args=(port, conversations // servers, prefix, result),
            )
            for port, prefix, result in zip(ports, prefixes, results, strict=True)
        ]
        before = _processes()
        serving = {me} | {p.pid for p, _ in others if p.pid}
        run_wait0 = {pid: _run_wait(pid) for pid, (ppid, _) in before.items() if ppid in serving}
        for load in loads:
            load.start()
        backends = _pg_backends(db_url) if "postgresql" in db_url else []
        for load in loads:
            load.join()
        sent = [dict(r) for r in results]
        burst = Burst(
            conversations=sum(s["conversations"] for s in sent),
            spans=sum(s["spans"] for s in sent),
            failed=sum(s["failed"] for s in sent),
        )
        first_send = min(s["first_send"] for s in sent)
        last_ack = max(s["last_ack"] for s in sent)
        burst.ingest_spans_per_s = burst.spans / (last_ack - first_send)
        scored, first_eval, last_eval, seen_at, burst.unscored, burst.ready = _wait_scored(
            db_url, prefixes, burst.conversations, timeout=300, settle=settle
        )
        after = _processes()
        scoring_pids = [
            pid
            for pid, (ppid, _) in after.items()
            if ppid in serving and pid not in {manager._process.pid} | {load.pid for load in loads}  # type: ignore[attr-defined]
        ]
        waited = sum(_run_wait(pid) for pid in scoring_pids) - sum(
            run_wait0.get(pid, 0.0) for pid in scoring_pids
        )
        backends += [p for p in (_pg_backends(db_url) if backends else []) if p not in backends]
        burst.scored = scored
        if scored:
            burst.scored_per_s = scored / (last_eval - first_eval).total_seconds()
            burst.stamped_lag_s = last_eval.timestamp() - last_ack
            burst.lag_s = seen_at - last_ack
        skip = {manager._process.pid} | {load.pid for load in loads}  # type: ignore[attr-defined]
        burst.cpu = _cpu_split(before, after, serving, skip, backends, sent)
        burst.scoring_wait_s = waited
        if scored:
            burst.scoring_busy_s = (last_eval - first_eval).total_seconds()
        for proc, here in others:
            here.send("stop")
            proc.join(60)
    return burst


def _cpu_split(
    before: dict[int, tuple[int, float]],
    after: dict[int, tuple[int, float]],
    servers: set[int],
    skip: set[int],
    backends: list[int],
    sent: list[dict[str, Any]],
) -> dict[str, float]:
    """CPU seconds of the run by process type."""
    # the load runs on the same CPUs: its own CPU time, which it reports as it ends
    cpu = {"server": 0.0, "scoring": 0.0, "client": sum(r["cpu"] for r in sent)}
    for pid, (ppid, seconds) in after.items():
        used = seconds - before.get(pid, (0, 0.0))[1]
        if pid in servers:
            cpu["server"] += used
        elif ppid in servers and pid not in skip:
            cpu["scoring"] += used
        elif pid in backends:  # connected during the run: all of its CPU
            cpu["postgresql"] = cpu.get("postgresql", 0.0) + used
    return cpu


def _report(name: str, i: int, b: Burst, settle: float) -> str:
    per = ", ".join(
        f"{kind} {1e6 * s / b.spans:.0f} us/span = {1e3 * s / max(1, b.scored):.2f} ms/conv"
        for kind, s in b.cpu.items()
    )
    return (
        f"  {name} run {i}: {b.conversations} conversations ({b.spans} spans) acknowledged at "
        f"{b.ingest_spans_per_s:.0f} spans/s; scored {b.scored} at {b.scored_per_s:.0f} conv/s; "
        f"every evaluation visible {b.lag_s:.2f} s after the last acknowledgement (target <= "
        f"{settle + 1:g} s; the last row's created_at says {b.stamped_lag_s:.2f} s); at the "
        f"last acknowledgement {b.unscored} not scored yet, {b.ready} of them ready (quiet for "
        f"{settle:g} s); "
        f"CPU: {per}; scoring processes over the {b.scoring_busy_s:.1f} s "
        f"from first to last evaluation: {b.cpu.get('scoring', 0):.1f} s on a CPU, "
        f"{b.scoring_wait_s:.1f} s waiting for one; failed requests {b.failed}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=30_000)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scoring-processes", type=int, default=None, metavar="N")
    parser.add_argument("--servers", type=int, default=1, help="serve processes (PostgreSQL)")
    parser.add_argument("--postgres", metavar="URL", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--grpc",
        action="store_true",
        help=f"send over OTLP/gRPC, {GRPC_IN_FLIGHT} requests in flight (one serve process)",
    )
    parser.add_argument(
        "--backpressure-lag",
        metavar="S[,S...]",
        help="serve's --backpressure-lag; several (e.g. 0.5,0: on and off) alternate run by run",
    )
    args = parser.parse_args()
    lags: list[float | None] = (
        [float(v) for v in args.backpressure_lag.split(",")] if args.backpressure_lag else [None]
    )
    if args.grpc and args.servers > 1:
        parser.error("--grpc takes one serve process")
    tmp = tempfile.TemporaryDirectory()
    url = args.postgres or f"sqlite:///{Path(tmp.name) / 'bench.db'}"
    name = "postgresql" if args.postgres else "sqlite"
    if args.servers > 1 and not args.postgres:
        parser.error("--servers > 1 needs --postgres")
    print(
        f"burst of {args.conversations} conversations ({SPANS_PER_TRACE} spans each), settle "
        f"{args.settle:g} s, {args.servers} serve process(es), scoring processes per serve: "
        f"{args.scoring_processes or 'auto'}; load average {os.getloadavg()[0]:.1f}"
    )
    by_lag: dict[float | None, list[Burst]] = {lag: [] for lag in lags}
    for i in range(args.runs):
        for lag in lags if i % 2 == 0 else lags[::-1]:
            if not args.postgres:
                Path(tmp.name, "bench.db").unlink(missing_ok=True)
            _prepare(url)
            b = run_once(
                url,
                args.conversations,
                args.settle,
                args.scoring_processes,
                args.servers,
                args.grpc,
                lag,
            )
            by_lag[lag].append(b)
            label = name if lag is None else f"{name} backpressure-lag {lag:g}"
            print(_report(label, i + 1, b, args.settle), flush=True)
    for lag, runs in by_lag.items():
        label = name if lag is None else f"{name} backpressure-lag {lag:g}"
        _summary(label, runs)
    tmp.cleanup()


def _summary(name: str, runs: list[Burst]) -> None:
    def med(f: Any) -> float:
        return statistics.median(f(b) for b in runs)

    kinds = sorted({k for b in runs for k in b.cpu})
    cpu = ", ".join(
        f"{k} {med(lambda b, k=k: 1e6 * b.cpu.get(k, 0) / b.spans):.0f} us/span" for k in kinds
    )
    print(
        f"{name} median: ingest {med(lambda b: b.ingest_spans_per_s):.0f} spans/s, scored "
        f"{med(lambda b: b.scored_per_s):.0f} conv/s, every evaluation visible "
        f"{med(lambda b: b.lag_s):.2f} s after the last acknowledgement (created_at: "
        f"{med(lambda b: b.stamped_lag_s):.2f} s); CPU {cpu}; load "
        f"average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
