"""Does the SQLite file stop growing with span retention on? A short soak of ``toolscore serve``.

``serve`` (scoring on, ``--span-retention`` short so that the steady state comes within minutes)
receives the pipeline benchmark's load (7-span GenAI conversations over OTLP/HTTP, every one
matching an expectation) at ``--rate`` spans/s for ``--duration`` s; every ``--every`` seconds
the script prints the spans stored, the database file's size (with its WAL) and its pages in
use. With retention the stored spans and the file level off at about rate x (retention + settle
+ pass interval); the ingest keeps its rate.

    cd benchmarks && ../.venv/bin/python bench_retention_soak.py --rate 1500 --duration 180 \\
        --retention 30s --interval 5
"""

from __future__ import annotations

import argparse
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_pipeline import _prepare
from pipeline_load import load


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sample(path: Path) -> tuple[int, int, int]:
    """(spans, file bytes with the WAL, bytes of pages in use)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
        spans = db.execute("SELECT count(*) FROM spans").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
        used = db.execute("PRAGMA page_count").fetchone()[0]
        used -= db.execute("PRAGMA freelist_count").fetchone()[0]
    wal = path.with_name(path.name + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return int(spans), size, int(used * page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1500)
    parser.add_argument("--duration", type=float, default=180)
    parser.add_argument("--retention", default="30s")
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--every", type=float, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soak.db"
        url = f"sqlite:///{path}"
        _prepare(url)
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", url, "--grpc", "off",
             "--http", f"127.0.0.1:{port}", "--settle", "1", "--log-level", "WARNING",
             "--span-retention", args.retention,
             "--span-retention-interval", str(args.interval)],
            cwd=tmp,
        )  # fmt: skip
        try:
            time.sleep(3)
            result: dict[str, Any] = {}
            sender = threading.Thread(
                target=load, args=(port, args.rate, args.duration, "soak", result)
            )
            started = time.monotonic()
            sender.start()
            print("| s | spans stored | file + WAL (MiB) | pages in use (MiB) |")
            print("|---:|---:|---:|---:|")
            while sender.is_alive():
                sender.join(args.every)
                spans, size, used = _sample(path)
                print(
                    f"| {time.monotonic() - started:.0f} | {spans:,} | {size / 2**20:.1f} "
                    f"| {used / 2**20:.1f} |",
                    flush=True,
                )
            print(f"load: {result}")
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                tables = db.execute(
                    "SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s "
                    "LEFT JOIN sqlite_master m ON m.name = s.name GROUP BY 1 ORDER BY 2 DESC"
                ).fetchall()
            print("MiB by table (with indexes): " + ", ".join(
                f"{name} {size / 2**20:.1f}" for name, size in tables[:8]
            ))  # fmt: skip
        finally:
            server.terminate()
            server.wait(60)


if __name__ == "__main__":
    main()
