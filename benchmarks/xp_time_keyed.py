"""Experiment: a copy of a SQLite database whose ``spans`` table is keyed by start minute first.

Today's ``spans`` key ``(trace_id, span_id)`` sends every new trace to a random leaf of an index
that grows with the data, so its whole size has to stay in memory for ingest to stay flat.
Keyed ``(start_ns / 60 s, trace_id, span_id)`` instead, new spans land in the index's last few
minutes (a resent span carries its start time again, so resends are still caught, as with
PostgreSQL's ``(trace_id, span_id, start_ns)``). This makes such a copy, so that
``ingest_phases.py`` can time the real ingest path on both layouts; reads by trace would need
the minutes of each trace (not built: this is for measuring the write side only).

    cd benchmarks && python xp_time_keyed.py /work/growthdata/grown.db /work/growthdata/keyed.db
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time

MINUTE_NS = 60_000_000_000


def rebuild(path: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'spans'").fetchone()
    # the same columns, without the table's primary key (its index is what we replace)
    columns = ddl[ddl.index("(") + 1 : ddl.rindex("CONSTRAINT")].rstrip().rstrip(",")
    db.execute("BEGIN")
    db.execute(f"CREATE TABLE spans_keyed ({columns})")
    db.execute("INSERT INTO spans_keyed SELECT * FROM spans ORDER BY rowid")
    db.execute(
        f"CREATE UNIQUE INDEX ux_spans_minute ON spans_keyed "
        f"(start_ns / {MINUTE_NS}, trace_id, span_id)"
    )
    db.execute("DROP TABLE spans")
    db.execute("ALTER TABLE spans_keyed RENAME TO spans")
    db.execute("COMMIT")
    db.execute("VACUUM")
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a SQLite file (not being written)")
    parser.add_argument("target", help="the copy to make")
    args = parser.parse_args()
    began = time.monotonic()
    shutil.copyfile(args.source, args.target)
    rebuild(args.target)
    print(f"{args.target}: spans keyed by start minute in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
