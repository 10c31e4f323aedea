"""Does scoring keep up with ingest? Latency from a conversation's last span to its evaluations.

One ``toolscore serve`` app (receiver + pipeline, same process) on SQLite and/or PostgreSQL; a
separate load process posts OTLP/HTTP protobuf requests of agent traces (7 spans each: an
``invoke_agent`` root carrying a conversation id and a reference id, two ``chat`` spans and four
``execute_tool`` spans, OTel GenAI conventions) at a fixed span rate. Every conversation matches
an expectation, so every one is scored. Reported per run and as the median of the runs:

- ingest: spans/s accepted; the peer is the same load with ``--no-scoring`` (receiver only), so
  the ratio shows what the pipeline costs the receiver;
- conversations scored per second (while the load runs), and the p50 / p99 / max latency from a
  conversation's last span (its ``last_span_at``) to its evaluation rows (``created_at``). The
  target: every conversation scored, p99 <= settle + 1 s, ingest >= 0.95x the
  receiver alone.

    .venv/bin/python benchmarks/bench_pipeline.py --rate 10000 --duration 10 --runs 3 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLES = (
    "spans",
    "log_records",
    "conversations",
    "evaluations",
    "tool_calls",
)


# --- the server (this process) ---------------------------------------------------------------


class _Server:
    def __init__(
        self,
        db_url: str,
        settle: float,
        scoring: bool,
        processes: int | None = None,
        grpc: bool = False,
        pipeline: dict[str, Any] | None = None,
    ) -> None:
        from toolscore.collector.app import App
        from toolscore.collector.pipeline.extension import pipeline_extension
        from toolscore.collector.pipeline.options import PipelineOptions
        from toolscore.collector.settings import Listen, Settings

        grpc_listen = Listen("127.0.0.1", 0) if grpc else None
        settings = Settings(db_url=db_url, grpc=grpc_listen, http=Listen("127.0.0.1", 0))
        options = PipelineOptions(
            enabled=scoring,
            settle_s=settle,
            separate_process=True,
            scoring_processes=processes,
            **(pipeline or {}),
        )
        self.app = App(settings, [pipeline_extension(options)])
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def run() -> None:
            self._stop = asyncio.Event()
            await self.app.start()
            self._ready.set()
            await self._stop.wait()
            await self.app.stop()

        self._loop.run_until_complete(run())

    def __enter__(self) -> _Server:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


@dataclass
class RunResult:
    spans_per_s: float
    failed: int
    conversations: int
    scored: int = 0
    scored_per_s: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    max: float = 0.0
    server_cpu_us_per_span: float = 0.0  # the serve process (receiver, hook, worker loop)
    scoring_cpu_ms_per_conv: float = 0.0  # its scoring child process(es)


def _children_cpu_s(exclude: set[int]) -> float:
    """CPU seconds of this process's child processes (Linux /proc), except ``exclude``."""
    import os

    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        if int(fields[1]) == os.getpid() and pid not in exclude:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _prepare(db_url: str) -> None:
    from pipeline_load import import_bench_expectation

    from toolscore.storage.migrate import upgrade
    from toolscore.storage.plumbing.engine import create_engine

    upgrade(db_url)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        # Every run starts from empty tables, as on SQLite (a new file per run): a database
        # reused across runs would carry the earlier runs' rows and, where autovacuum is off
        # (as on some test servers' PostgreSQL), their dead row versions.
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"TRUNCATE {', '.join(TABLES)} CASCADE")
        else:
            for table in TABLES:
                conn.exec_driver_sql(f"DELETE FROM {table}")
    import_bench_expectation(engine)
    engine.dispose()


def _latencies(db_url: str, prefix: str, expected: int, timeout: float) -> tuple[list[float], Any]:
    from sqlalchemy import func, select

    from toolscore.storage.conversations.tables import conversations, evaluations
    from toolscore.storage.plumbing.engine import create_engine

    engine = create_engine(db_url)
    deadline = time.monotonic() + timeout
    c, e = conversations.c, evaluations.c
    like = c.id.like(f"{prefix}-%")
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                select(func.count()).where(like, c.revision >= 1, c.needs_scoring.is_(False))
            ).scalar_one()
            conn.rollback()
            if done >= expected:
                break
            time.sleep(0.25)
        rows = conn.execute(
            select(c.last_span_at, func.min(e.created_at))
            .join(evaluations, e.conversation_id == c.id)
            .where(like, e.revision == 1)
            .group_by(c.id, c.last_span_at)
        ).all()
    engine.dispose()
    latencies = sorted((created - last).total_seconds() for last, created in rows)
    return latencies, [created for _, created in rows]


def run_once(
    db_url: str,
    *,
    rate: float,
    duration: float,
    settle: float,
    scoring: bool,
    processes: int | None = None,
) -> RunResult:
    from benchmarks.pipeline_load import load as post_load

    prefix = f"b{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        result = manager.dict()
        with _Server(db_url, settle, scoring, processes) as server:
            port = server.app.http_port
            load = ctx.Process(target=post_load, args=(port, rate, duration, prefix, result))
            time.sleep(3)  # the scoring child starts up (imports) before the clock starts
            manager_pid = manager._process.pid  # type: ignore[attr-defined]
            child_cpu0 = _children_cpu_s({manager_pid})
            # The server's threads only: this (main) thread's polling and latency query are
            # the benchmark's, not serve's.
            cpu0, main0 = time.process_time(), time.thread_time()
            load.start()
            load.join()
            sent = dict(result)
            run = RunResult(
                spans_per_s=sent["spans"] / sent["seconds"],
                failed=sent["failed"],
                conversations=sent["conversations"],
            )
            if scoring:
                latencies, created = _latencies(
                    db_url, prefix, sent["conversations"], timeout=settle + 60
                )
                run.scored = len(latencies)
                if latencies:
                    run.p50 = latencies[len(latencies) // 2]
                    run.p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
                    run.max = latencies[-1]
                    span = (max(created) - min(created)).total_seconds()
                    run.scored_per_s = len(latencies) / span if span > 0 else float("nan")
                    scoring_cpu = _children_cpu_s({manager_pid, load.pid or -1}) - child_cpu0
                    run.scoring_cpu_ms_per_conv = 1000 * scoring_cpu / len(latencies)
            server_cpu = time.process_time() - cpu0 - (time.thread_time() - main0)
            run.server_cpu_us_per_span = 1e6 * server_cpu / max(1, sent["spans"])
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10_000, help="offered spans per second")
    parser.add_argument("--duration", type=float, default=10, help="seconds of load per run")
    parser.add_argument("--settle", type=float, default=2.0, help="pipeline settle time (s)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="also run on this PostgreSQL database")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument(
        "--scoring-processes",
        type=int,
        default=None,
        metavar="N",
        help="default: serve's default (auto: one per core, up to 4)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # run as a script: make ``benchmarks`` importable
    from benchmarks.pipeline_load import SPANS_PER_TRACE

    targets: list[tuple[str, str]] = []
    tmp = tempfile.TemporaryDirectory()
    if not args.no_sqlite:
        targets.append(("sqlite", f"sqlite:///{Path(tmp.name) / 'bench.db'}"))
    if args.postgres:
        targets.append(("postgresql", args.postgres))
    print(
        f"offered load {args.rate:.0f} spans/s ({SPANS_PER_TRACE} spans/trace, one conversation "
        f"per trace), {args.duration:g} s per run, settle {args.settle:g} s, {args.runs} runs, "
        f"scoring processes: {args.scoring_processes or 'auto (as serve)'}"
    )
    for name, url in targets:
        _prepare(url)
        with_pipeline, receiver_only = [], []
        for i in range(args.runs):
            _prepare(url)
            peer = run_once(
                url, rate=args.rate, duration=args.duration, settle=args.settle, scoring=False
            )
            _prepare(url)
            run = run_once(
                url,
                rate=args.rate,
                duration=args.duration,
                settle=args.settle,
                scoring=True,
                processes=args.scoring_processes,
            )
            receiver_only.append(peer)
            with_pipeline.append(run)
            print(
                f"  {name} run {i + 1}: ingest {run.spans_per_s:8.0f} spans/s "
                f"(receiver only {peer.spans_per_s:8.0f}); scored {run.scored}/"
                f"{run.conversations} at {run.scored_per_s:6.0f} conv/s; latency p50 "
                f"{run.p50:.2f} s p99 {run.p99:.2f} s max {run.max:.2f} s; CPU: server "
                f"{run.server_cpu_us_per_span:.0f} us/span (receiver only "
                f"{peer.server_cpu_us_per_span:.0f}), scoring {run.scoring_cpu_ms_per_conv:.2f} "
                f"ms/conversation; failed requests {run.failed + peer.failed}"
            )

        def med(xs: list[RunResult], attr: str) -> float:
            return statistics.median(getattr(x, attr) for x in xs)

        ingest, peer = med(with_pipeline, "spans_per_s"), med(receiver_only, "spans_per_s")
        p99 = med(with_pipeline, "p99")
        all_scored = all(r.scored == r.conversations for r in with_pipeline)
        met = all_scored and p99 <= args.settle + 1 and ingest >= 0.95 * peer
        verdict = "met" if met else "MISSED"
        print(
            f"{name} median: ingest {ingest:.0f} spans/s = {ingest / peer:.2f}x receiver-only "
            f"({peer:.0f}); {med(with_pipeline, 'scored_per_s'):.0f} conversations scored/s; "
            f"latency p50 {med(with_pipeline, 'p50'):.2f} s, p99 {p99:.2f} s; target (all "
            f"scored, p99 <= {args.settle + 1:g} s, ingest >= 0.95x): {verdict}; server CPU "
            f"{med(with_pipeline, 'server_cpu_us_per_span'):.0f} us/span (receiver only "
            f"{med(receiver_only, 'server_cpu_us_per_span'):.0f}); scoring CPU "
            f"{med(with_pipeline, 'scoring_cpu_ms_per_conv'):.2f} ms/conversation"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
