"""Real GenAI traffic through ``toolscore serve``: ingest rate and bytes on disk per wire byte.

The load (real_traffic_load.py): the spans recorded from real frameworks (tests/fixtures/recorded)
replayed ``--copies`` times with fresh ids, plus one long conversation whose model spans repeat
the history (``--turns`` turns), as OTLP/gRPC requests of 512 spans, ``--concurrency`` in
flight, to a real ``serve`` with default settings. Reported per database, for this checkout and,
with ``--baseline-tree`` (an older checkout, e.g. a ``git worktree`` of main), for that version
in the same run, alternating order from run to run:

- spans/s and MB/s of wire until the last request is acknowledged (acknowledged = committed),
  and stored spans per CPU-second of the server (steadier on a shared machine);
- disk per wire byte after the run: SQLite after a checkpoint and VACUUM (the file), PostgreSQL
  after VACUUM FULL (``pg_total_relation_size`` of every table, indexes and TOAST included);
  both with the empty migrated schema subtracted; and disk per conversation;
- the long conversation: bytes of its stored span rows (their JSON and text columns) and of the
  stored pieces they refer to (``span_contents``, compressed, each once) per byte of its
  distinct content (each message once, as JSON).

    python benchmarks/bench_real_traffic.py --runs 3 --copies 10 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test --baseline-tree /tmp/main
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_ingest import _cpu_s, _drive, _drop_postgres, _free_port, _fresh_postgres, _wait_port
from real_traffic_load import LONG_ID, Corpus, build
from sqlalchemy import Connection, create_engine, text

ROOT = Path(__file__).resolve().parents[1]
PG_TABLES = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
)
# the long conversation's stored span payload: every column of its rows but the fixed-size ones
LONG_ROW_BYTES = (
    "SELECT sum(length(s.name) + length(s.status_message) + length(CAST(s.attributes AS TEXT)) "
    "+ length(CAST(s.resource_attributes AS TEXT)) + length(CAST(s.events AS TEXT)) "
    "+ length(CAST(s.links AS TEXT)) + length(s.scope_name) + length(s.scope_version)) "
    "FROM spans s WHERE CAST(s.attributes AS TEXT) LIKE :pattern"
)
LONG_JSON = (
    "SELECT CAST(s.attributes AS TEXT), CAST(s.events AS TEXT), CAST(s.links AS TEXT) "
    "FROM spans s WHERE CAST(s.attributes AS TEXT) LIKE :pattern"
)
PIECE_BYTES = "SELECT length(data) FROM span_contents WHERE day_ns = :day AND hash = :hash"


def _long_piece_bytes(conn: Connection, pattern: str) -> int:
    """The compressed bytes of every piece the long conversation's rows refer to, once each."""
    from toolscore.storage.telemetry.content_store import fetch_contents
    from toolscore.storage.telemetry.contents import references

    texts = [t for row in conn.execute(text(LONG_JSON), {"pattern": pattern}) for t in row]
    refs = references(texts)
    if not refs:
        return 0
    found: dict[tuple[int, str], str] = {}
    fetch_contents(conn, refs, found)
    return sum(
        int(conn.execute(text(PIECE_BYTES), {"day": d, "hash": h}).scalar_one()) for d, h in found
    )


@dataclass(frozen=True)
class Figures:
    system: str
    spans: int
    stored: int
    seconds: float
    disk_bytes: int
    wire_bytes: int
    conversations: int
    long_row_bytes: int
    long_distinct_bytes: int
    server_cpu_s: float  # what the server used while the load ran: steadier than the rate

    @property
    def spans_per_cpu_s(self) -> float:
        return self.stored / self.server_cpu_s

    @property
    def spans_per_s(self) -> float:
        return self.stored / self.seconds

    @property
    def wire_mb_per_s(self) -> float:
        return self.wire_bytes / self.seconds / 1e6

    @property
    def disk_per_wire(self) -> float:
        return self.disk_bytes / self.wire_bytes

    @property
    def disk_per_conversation(self) -> float:
        return self.disk_bytes / self.conversations

    @property
    def long_ratio(self) -> float:
        return self.long_row_bytes / self.long_distinct_bytes


def _sqlite_disk(url: str) -> int:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(path)


def _postgres_disk(url: str) -> int:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM FULL"))
            return int(conn.execute(text(PG_TABLES)).scalar_one())
    finally:
        engine.dispose()


def _disk(url: str) -> int:
    return _sqlite_disk(url) if url.startswith("sqlite") else _postgres_disk(url)


def _env(tree: str | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": tree or str(ROOT)}


def _migrate(url: str, tree: str | None) -> None:
    subprocess.run(
        [sys.executable, "-m", "toolscore", "db", "upgrade", "--db", url], env=_env(tree),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )  # fmt: skip


def run_serve(url: str, corpus: Corpus, concurrency: int, label: str, tree: str | None) -> Figures:
    """Migrate, measure the empty schema, run ``serve`` (of ``tree``: its PYTHONPATH) through
    the load, stop it, measure the disk."""
    _migrate(url, tree)
    empty = _disk(url)
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="toolscore-real-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolscore", "serve", "--db", url, "--grpc", f"127.0.0.1:{port}",
         "--http", "off", "--log-level", "WARNING", "--no-upgrade"],
        cwd=workdir, env=_env(tree),  # an empty cwd: `-m` puts the cwd first on sys.path
    )  # fmt: skip
    try:
        _wait_port(port)
        time.sleep(1.0)
        cpu0 = _cpu_s(proc.pid)
        load = asyncio.run(_drive(f"127.0.0.1:{port}", corpus.requests, concurrency))
        cpu = _cpu_s(proc.pid) - cpu0
    finally:
        proc.terminate()
        proc.wait(120)
    engine = create_engine(url)
    with engine.connect() as conn:
        stored = int(conn.execute(text("SELECT count(*) FROM spans")).scalar_one())
        long_rows = conn.execute(text(LONG_ROW_BYTES), {"pattern": f"%{LONG_ID}%"}).scalar_one()
        long_rows = int(long_rows or 0) + _long_piece_bytes(conn, f"%{LONG_ID}%")
    engine.dispose()
    return Figures(
        label, corpus.spans, stored, load.seconds, _disk(url) - empty,
        sum(map(len, corpus.requests)), corpus.conversations, int(long_rows or 0),
        corpus.long_distinct_bytes, cpu,
    )  # fmt: skip


def _versions(args: argparse.Namespace, run: int) -> list[tuple[str, str | None]]:
    versions: list[tuple[str, str | None]] = [("toolscore", None)]
    if args.baseline_tree:
        versions.append(("baseline", args.baseline_tree))
    return versions if run % 2 == 0 else versions[::-1]


def run_all(args: argparse.Namespace) -> list[Figures]:
    results: list[Figures] = []
    for run in range(args.runs):
        corpus = build(args.copies, args.turns, run + 1)
        for name, tree in _versions(args, run):
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{tmp}/real.db"
                results.append(run_serve(url, corpus, args.concurrency, f"{name} (sqlite)", tree))
                print(results[-1], flush=True)
        for name, tree in _versions(args, run) if args.postgres else ():
            url = _fresh_postgres(args.postgres)
            try:
                label = f"{name} (postgres)"
                results.append(run_serve(url, corpus, args.concurrency, label, tree))
                print(results[-1], flush=True)
            finally:
                _drop_postgres(url, args.postgres)
    return results


def report(results: Sequence[Figures], corpus: Corpus, concurrency: int) -> None:
    wire = sum(map(len, corpus.requests))
    print(
        f"\n{corpus.recordings} recordings, {corpus.conversations} conversations, "
        f"{corpus.spans} spans, {wire / 1e6:.1f} MB of OTLP protobuf ({wire / corpus.spans:,.0f} "
        f"B/span) per run; long conversation {corpus.long_spans} spans; {concurrency} in flight; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "| version (database) | spans/s | MB/s of wire | disk / wire bytes "
        "| spans per server CPU-second | disk KB per conversation "
        "| long conversation: stored / distinct bytes | all stored |"
    )
    print("|---|---|---|---|---|---|---|---|")
    med: dict[str, dict[str, float]] = {}
    for system in dict.fromkeys(r.system for r in results):
        rs = [r for r in results if r.system == system]
        m = med[system] = {
            f: statistics.median(getattr(r, f) for r in rs)
            for f in ("spans_per_s", "wire_mb_per_s", "disk_per_wire", "spans_per_cpu_s",
                      "disk_per_conversation", "long_ratio")
        }  # fmt: skip
        print(
            f"| {system} | {m['spans_per_s']:,.0f} | {m['wire_mb_per_s']:.1f} "
            f"| {m['disk_per_wire']:.2f}x | {m['spans_per_cpu_s']:,.0f} "
            f"| {m['disk_per_conversation'] / 1e3:.1f} "
            f"| {m['long_ratio']:.1f}x | {all(r.stored == r.spans for r in rs)} |"
        )
    for system, now in med.items():
        base = med.get(system.replace("toolscore", "baseline", 1))
        if system.startswith("toolscore") and base:
            print(f"{system} / baseline: " + ", ".join(f"{k} {now[k] / base[k]:.2f}x" for k in now))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10, help="copies of each recording")
    parser.add_argument("--turns", type=int, default=40, help="turns of the long conversation")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="server URL; a fresh database per run")
    parser.add_argument(
        "--baseline-tree", metavar="DIR", help="an older checkout (e.g. a git worktree of main) "
        "whose serve runs beside this one's, for a side-by-side A/B"
    )  # fmt: skip
    args = parser.parse_args(argv)
    results = run_all(args)
    report(results, build(args.copies, args.turns, 0), args.concurrency)
    return 0 if all(r.stored == r.spans for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
