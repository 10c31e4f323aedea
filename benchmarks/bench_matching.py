"""Matching a conversation to its expectation with 10,000 rule expectations, beside exact lookups.

For each database (a SQLite file, and PostgreSQL with ``--postgres URL``) and each run, two fresh
databases are migrated:

- *rules*: ``--count`` rule expectations (``match.user_input: {regex}`` with named groups, most
  combined with exact-valued attributes, some with attribute lists, a share case-insensitive
  or with attribute regexes alone, which the index cannot narrow and tries on every conversation);
- *exact* (the peer): as many expectations matched by exact first user message, today's form.

Each conversation (a few spans with span and resource attributes) is matched by the scoring
pipeline's ``Matcher`` (``facts`` from the spans, then ``match``: the reference-id,
conversation-id and user-input lookups, then the rules), timed alone; every match must find the
expected expectation. Also reported: the rule index alone (``RuleIndex.hits``, no database) and
building the index (loading and compiling every rule, once per import; CPU seconds).

Medians over runs (latencies: median of each run's median over ``--conversations``).

    .venv/bin/python benchmarks/bench_matching.py --count 10000 --runs 3 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make ``benchmarks`` importable

from benchmarks.bench_expectations import _database  # noqa: E402
from toolscore.collector.pipeline.matching import Matcher, rule_index  # noqa: E402
from toolscore.storage import migrate  # noqa: E402
from toolscore.storage.expectations.repository import (  # noqa: E402
    ExpectationData,
    import_expectations,
)
from toolscore.storage.plumbing.engine import create_engine  # noqa: E402
from toolscore.storage.records import SpanRecord  # noqa: E402

AGENTS = 200
REFERENCE = [{"name": "book", "args": {"seats": "{n|int}", "city": "{city}"}}]


def _rule(i: int) -> dict[str, Any]:
    """Rule ``i``: 80 % regex + exact attributes, 10 % regex + a list, 5 % case-insensitive
    regex, 5 % attribute regex alone (the last two are tried on every conversation)."""
    regex = rf"book (?P<n>\d+) seats? to (?P<city>\w+) on route {i:05d}\b"
    kind = i % 20
    if kind < 16:
        attributes: dict[str, Any] = {
            "gen_ai.agent.name": f"agent-{i % AGENTS}",
            "deployment.environment": "prod",
        }
        return {"user_input": {"regex": regex}, "attributes": attributes}
    if kind < 18:
        agents = [f"agent-{i % AGENTS}", f"agent-{(i + 1) % AGENTS}"]
        return {"user_input": {"regex": regex}, "attributes": {"gen_ai.agent.name": agents}}
    if kind < 19:
        return {"user_input": {"regex": f"(?i){regex}"}}
    return {"attributes": {"tenant.id": {"regex": rf"^tenant-{i:05d}$"}}}


def _message(i: int) -> str:
    return f"Please book 3 seats to Lyon on route {i:05d} tomorrow"


def _spans(i: int) -> list[SpanRecord]:
    resource = {"service.name": "travel", "deployment.environment": "prod"}
    attributes = {"gen_ai.agent.name": f"agent-{i % AGENTS}", "tenant.id": f"tenant-{i:05d}"}
    return [
        SpanRecord(f"{i:032x}", f"{k + 1:016x}", None, "chat", 1, 0, 1, attributes, resource)
        for k in range(5)
    ]


def _import(url: str, items: list[ExpectationData]) -> None:
    migrate.upgrade(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            import_expectations(conn, items)
    finally:
        engine.dispose()


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _timed_matches(url: str, count: int, n: int, message: Callable[[int], str]) -> dict[str, float]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            start = time.process_time()
            index, _ = rule_index(conn)
            build = time.process_time() - start
            matcher = Matcher(conn)
            whole: list[float] = []
            alone: list[float] = []
            for k in range(n):
                i = (k * 7919) % count
                spans = _spans(i)
                start = time.perf_counter()
                facts = matcher.facts(spans, message(i))
                found = matcher.match(None, f"conv-{k}", facts)
                whole.append(time.perf_counter() - start)
                assert found is not None and found.row.id == f"case-{i:05d}", (i, found)
                start = time.perf_counter()
                index.hits(facts)
                alone.append(time.perf_counter() - start)
            conn.rollback()
        return {"match": _median_ms(whole), "index": _median_ms(alone), "build": build}
    finally:
        engine.dispose()


def run_once(kind: str, postgres: str | None, count: int, n: int) -> dict[str, float]:
    rules = [ExpectationData(f"case-{i:05d}", REFERENCE, match=_rule(i)) for i in range(count)]
    exact = [
        ExpectationData(f"case-{i:05d}", REFERENCE, match={"user_input": _message(i)})
        for i in range(count)
    ]
    with _database(kind, postgres) as url:
        _import(url, rules)
        by_rule = _timed_matches(url, count, n, _message)
    with _database(kind, postgres) as url:
        _import(url, exact)
        by_text = _timed_matches(url, count, n, _message)
    return {
        "rule_match": by_rule["match"],
        "rule_index": by_rule["index"],
        "rule_build_s": by_rule["build"],
        "exact_match": by_text["match"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="expectations of each kind")
    parser.add_argument("--conversations", type=int, default=500, help="matched per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default=None, metavar="URL", help="also run on PostgreSQL")
    args = parser.parse_args()
    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    for kind in kinds:
        runs = [
            run_once(kind, args.postgres, args.count, args.conversations) for _ in range(args.runs)
        ]
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{kind}: {args.count} expectations, median of {args.runs} runs")
        peer = med["exact_match"]
        print(f"  {'exact user input (peer)':34} {peer:8.3f} ms")
        ratio = med["rule_match"] / peer
        print(f"  {'rules: match a conversation':34} {med['rule_match']:8.3f} ms  ({ratio:.2f}x)")
        print(f"  {'rules: the index alone':34} {med['rule_index']:8.3f} ms")
        print(f"  {'rules: build the index (CPU)':34} {med['rule_build_s']:8.3f} s")


if __name__ == "__main__":
    main()
