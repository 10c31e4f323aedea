"""The child process of ``bench_scoring_round.py``: one measurement (fill, score, report JSON).

Run by the parent as ``python bench_scoring_round.py --child ...``; see that script's docstring.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PHASES = (
    "claim", "sizes", "heads", "load", "decode", "reconstruct", "match", "score", "rows",
    "write", "commit", "other",
)  # fmt: skip
# phase -> (module, attribute) of the functions that make it up; absent ones are skipped.
WRAPPED: dict[str, tuple[tuple[str, str], ...]] = {
    "claim": (
        ("storage.conversations.leases", "claim_ready"),
        ("storage.conversations.leases", "next_due_ns"),
    ),
    "sizes": (("storage.conversations.leases", "span_counts"),),
    "heads": (
        ("storage.conversations.reading", "heads_and_traces"),
        ("storage.retention.spans", "carried"),
    ),
    "load": (
        ("storage.telemetry.spans", "load_spans"),
        ("storage.telemetry.spans", "load_logs"),
        ("storage.telemetry.content_store", "fetch_contents"),  # called while spans decode
    ),
    "decode": (
        ("storage.plumbing.jsoncodec", "json_loads"),
        ("storage.telemetry.spans", "_span_from_values"),
        ("storage.telemetry.spans", "decode_spans"),
    ),
    "reconstruct": (("collector.reconstruction.rebuild", "reconstruct"),),
    "match": (("collector.pipeline.matching", "Matcher.match"),),
    "score": (("collector.pipeline.score", "_evaluate"),),
    "rows": (
        ("collector.pipeline.score", "_call_rows"),
        ("collector.pipeline.score", "_storable_evaluations"),
        ("collector.pipeline.not_evaluated", "mark_not_evaluated"),
    ),
    "write": (  # the rows made (before the transaction) and the statements
        ("storage.history.evaluations", "prepare_revisions"),
        ("storage.history.evaluations", "write_revisions"),
    ),
}


def _use_tree(tree: Path) -> None:
    """Import ``toolscore`` and its sub-packages from ``tree`` (laid out as the repository)."""
    import importlib.abc
    import importlib.util

    folders = {
        "toolscore": tree / "toolscore",
        "toolscore.collector": tree / "collector",
        "toolscore.scorer": tree / "scorer",
        "toolscore.storage": tree / "storage",
    }

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name in folders:
                init = folders[name] / "__init__.py"
                return importlib.util.spec_from_file_location(
                    name, init, submodule_search_locations=[str(folders[name])]
                )
            return None

    sys.meta_path.insert(0, Finder())


class _Phases:
    """Exclusive thread CPU time per phase, from wrappers around the phases' functions."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(PHASES, 0.0)
        self._stack: list[list[float]] = []  # [start, time of wrapped callees]

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock, stack, spent = time.thread_time, self._stack, self.spent

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            frame = [clock(), 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                took = clock() - frame[0]
                spent[phase] += took - frame[1]
                if stack:
                    stack[-1][1] += took

        return wrapped

    def install(self) -> None:
        import importlib

        for phase, targets in WRAPPED.items():
            for module_name, attr in targets:
                module = importlib.import_module(f"toolscore.{module_name}")
                owner_name, _, name = attr.rpartition(".")
                owner = getattr(module, owner_name) if owner_name else module
                if not hasattr(owner, name):
                    continue
                original = getattr(owner, name)
                wrapped = self.wrap(phase, original)
                setattr(owner, name, wrapped)
                # also where other modules imported it by name; the JSON decoder only in
                # storage (reconstruction's own JSON parsing is reconstruction's cost)
                where = "toolscore.storage" if name == "json_loads" else "toolscore"
                if not owner_name:
                    for other in list(sys.modules.values()):
                        if getattr(other, "__name__", "").startswith(where) and any(
                            v is original for v in vars(other).values()
                        ):
                            for key, value in list(vars(other).items()):
                                if value is original:
                                    setattr(other, key, wrapped)
        from sqlalchemy.engine.base import Connection

        Connection._commit_impl = self.wrap("commit", Connection._commit_impl)  # type: ignore[method-assign]


def _import_all() -> None:
    import toolscore.collector.pipeline.rounds
    import toolscore.collector.pipeline.score
    import toolscore.storage.plumbing.engine  # noqa: F401


def _fill(url: str, conversations: int) -> int:
    """Store ``conversations`` ready conversations as ingest does; returns the spans stored."""
    sys.path.insert(0, str(HERE))
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from pipeline_load import TRACES_PER_REQUEST, import_bench_expectation, payloads

    from toolscore.collector.otlp.decode import decode_traces
    from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
    from toolscore.storage.migrate import upgrade
    from toolscore.storage.plumbing.engine import create_engine
    from toolscore.storage.telemetry.row_encode import prepare_telemetry
    from toolscore.storage.telemetry.spans import store_telemetry

    engine = create_engine(url)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # a fresh schema: each tree migrates its own
            conn.exec_driver_sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    upgrade(url)
    import_bench_expectation(engine)
    requests = -(-conversations // TRACES_PER_REQUEST)
    at_ns = time.time_ns() - 600 * 10**9  # long settled
    stored = 0
    for body in payloads("conv", requests):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = decode_traces(request).spans
        with engine.begin() as conn:
            new = store_telemetry(conn, prepare_telemetry(spans, (), at_ns))
            assign_spans(conn, spans, received_at_ns=at_ns, config=AssignConfig(), numbered=new)
        stored += len(spans)
    engine.dispose()
    return stored


def _scored(url: str) -> int:
    from sqlalchemy import func, select

    from toolscore.storage.conversations.tables import conversations
    from toolscore.storage.plumbing.engine import create_engine

    engine = create_engine(url)
    c = conversations.c
    with engine.connect() as conn:
        n = conn.execute(
            select(func.count()).where(c.status == "scored", c.needs_scoring.is_(False))
        ).scalar_one()
    engine.dispose()
    return int(n)


_SEEN: dict[int, float] = {}


def _server_cpu(url: str) -> float:
    """CPU seconds of the PostgreSQL backends serving ``url``'s database (0 on SQLite); a
    backend that went away keeps counting what it used while seen."""
    if not url.startswith("postgresql"):
        return 0.0
    database = url.rsplit("/", 1)[1].split("?")[0].encode()
    ticks = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            words = (proc / "cmdline").read_bytes().split()
            if b"postgres:" not in words[:1] or database not in words:
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        _SEEN[int(proc.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return sum(_SEEN.values())


def child(args: argparse.Namespace) -> dict[str, Any]:
    if args.tree:
        _use_tree(Path(args.tree))
    _import_all()
    phases = _Phases() if args.phases else None
    if phases is not None:
        phases.install()  # before any engine exists: it captures the JSON decoder
    url = args.db
    if url is None:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='bench-round-')}/bench.db"
    conversations = -(-args.conversations // 73) * 73
    spans = _fill(url, conversations)
    import gc

    from toolscore.collector.pipeline.claim import Timing
    from toolscore.collector.pipeline.rounds import RoundRunner
    from toolscore.scorer import default_config
    from toolscore.storage.database import open_database

    runner = RoundRunner(
        open_database(url),
        default_config(),
        timing=Timing(settle_s=2.0),
        batch_size=args.batch,
        worker_id="bench",
    )
    gc.collect()
    gc.freeze()  # as the scoring process does (collector/pipeline/child.py)
    gc.set_threshold(50_000, 20, 100)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    if phases is not None:  # the fill's own statements and commits are not the round's
        phases.spent.update(dict.fromkeys(PHASES, 0.0))
    rounds = 0
    server = _server_cpu(url)
    wall, cpu = time.perf_counter(), time.thread_time()
    while runner.run_once().claimed:
        rounds += 1
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    server = _server_cpu(url) - server
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    scored = _scored(url)
    out: dict[str, Any] = {
        "conversations": conversations,
        "spans": spans,
        "scored": scored,
        "rounds": rounds,
        "cpu_ms_per_conv": cpu * 1e3 / conversations,
        "wall_ms_per_conv": wall * 1e3 / conversations,
        "server_ms_per_conv": server * 1e3 / conversations,
    }
    if phases is not None:
        known = sum(v for k, v in phases.spent.items() if k != "other")
        phases.spent["other"] = cpu - known
        out["phases_us"] = {k: v * 1e6 / conversations for k, v in phases.spent.items()}
    return out
