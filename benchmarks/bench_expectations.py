"""Expectations: import throughput and the cost of matching a conversation, per matching rule.

For each database (a SQLite file, and PostgreSQL with ``--postgres URL``) and each run, a fresh
database is migrated, then:

- import N new expectations (each with a ``match`` rule), re-import them unchanged, and import
  them all changed (a new version each); reported as expectations per second;
- match conversations with ``storage.expectations.repository.match_expectation`` by each rule:
reference id,
  conversation id (after a miss on the reference id), first user message (after misses on both).
  The peer is ``find_by_id``, a primary-key lookup, measured in the same run: the ratio says what
  the rule costs over the cheapest possible lookup.

Medians over runs (latencies: median of each run's median over ``--lookups`` lookups).

    .venv/bin/python benchmarks/bench_expectations.py --count 10000 --runs 3 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from toolscore.storage import migrate
from toolscore.storage.expectations.repository import (
    ExpectationData,
    find_by_id,
    import_expectations,
    match_expectation,
)
from toolscore.storage.plumbing.engine import create_engine


def _items(count: int, tag: str) -> list[ExpectationData]:
    return [
        ExpectationData(
            f"case-{i:06d}",
            [
                {"name": "get_weather", "args": {"city": f"City {i}", "v": tag}},
                {"name": "get_time", "args": {"timezone": "Europe/Paris"}},
            ],
            user_input=f"What's the weather in City {i}?",
            match={"conversation_id": [f"conv-{i}"], "user_input": f"Weather in City {i}?"},
        )
        for i in range(count)
    ]


@contextmanager
def _database(kind: str, postgres: str | None) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    assert postgres is not None
    admin = create_engine(postgres, isolation_level="AUTOCOMMIT")
    name = f"bench_exp_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _lookups(conn: Connection, count: int, lookups: int, version: int) -> dict[str, float]:
    """Median seconds per lookup, by rule; every lookup must find the expected row."""
    samples: dict[str, list[float]] = {"find_by_id": [], "reference": [], "conv": [], "text": []}
    for k in range(lookups):
        i = (k * 7919) % count
        ident = f"case-{i:06d}"
        cases: dict[str, Callable[[], Any]] = {
            "find_by_id": partial(find_by_id, conn, ident),
            "reference": partial(
                match_expectation,
                conn,
                reference_id=ident,
                conversation_id=None,
                first_user_message=None,
            ),
            "conv": partial(
                match_expectation,
                conn,
                reference_id="unknown",
                conversation_id=f"conv-{i}",
                first_user_message=None,
            ),
            "text": partial(
                match_expectation,
                conn,
                reference_id="unknown",
                conversation_id="unknown",
                first_user_message=f"  weather IN city {i}? ",
            ),
        }
        for rule, call in cases.items():
            start = time.perf_counter()
            row = call()
            samples[rule].append(time.perf_counter() - start)
            assert row is not None and row.id == f"case-{i:06d}" and row.version == version
    return {rule: statistics.median(values) for rule, values in samples.items()}


def run_once(url: str, count: int, lookups: int) -> dict[str, float]:
    migrate.upgrade(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            first, changed = _items(count, "a"), _items(count, "b")
            result = {
                "import_new": count / _timed(lambda: import_expectations(conn, first)),
                "import_unchanged": count / _timed(lambda: import_expectations(conn, first)),
                "import_changed": count / _timed(lambda: import_expectations(conn, changed)),
            }
            result.update(_lookups(conn, count, lookups, version=2))
            conn.rollback()
        return result
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="expectations imported")
    parser.add_argument("--lookups", type=int, default=500, help="lookups per rule per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default=None, metavar="URL", help="also run on PostgreSQL")
    args = parser.parse_args()

    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    for kind in kinds:
        runs = []
        for _ in range(args.runs):
            with _database(kind, args.postgres) as url:
                runs.append(run_once(url, args.count, args.lookups))
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{kind}: {args.count} expectations, median of {args.runs} runs")
        for key in ("import_new", "import_unchanged", "import_changed"):
            print(f"  {key:18} {med[key]:>10.0f} expectations/s")
        peer = med["find_by_id"]
        print(f"  {'find_by_id (peer)':18} {peer * 1e3:>10.3f} ms")
        for key, label in (
            ("reference", "match by reference"),
            ("conv", "match by conv id"),
            ("text", "match by user input"),
        ):
            print(f"  {label:18} {med[key] * 1e3:>10.3f} ms  ({med[key] / peer:.2f}x peer)")


if __name__ == "__main__":
    main()
