"""Reference ids across processes: three ``python -m toolscore serve`` on one PostgreSQL, each
getting some of a trace's requests. The reference id and the conversation id of one trace arrive at
different servers, 0.2 s apart or at the same instant, so the ingest transactions that move a
trace and those that store its reference id run concurrently in different processes. Every
conversation must end scored against its reference, with no trace-keyed conversation left.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from sqlalchemy import func, select

from tests.collector.pipeline.e2e import import_refs, wait_scored
from tests.integration.reference_traces import (
    WEATHER,
    Sender,
    agent_turn,
    children_of,
    exporter_for,
    root_of,
    sender,
)
from tests.integration.test_pipeline_reference_move import (
    SCENARIOS,
    scenario_of,
    send_in_phases,
    stored_state,
)
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

SERVERS = 3
SERVE_FLAGS = [
    *("--grpc", "off", "--http", "127.0.0.1:0", "--no-upgrade"),
    *("--settle", "1", "--root-idle", "0.3", "--scoring-in-process", "--no-export"),
]
_LISTENING = re.compile(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)")


@contextmanager
def serve_process(db_url: str, log: Path) -> Iterator[str]:
    """A real ``toolscore serve`` subprocess on an ephemeral port; yields its HTTP URL."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", db_url, *SERVE_FLAGS],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := _LISTENING.search(log.read_text())):
            assert proc.poll() is None, f"serve exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"serve did not start: {log.read_text()}"
            time.sleep(0.1)
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(30)


def race(turns: Sequence[list[ReadableSpan]], urls: Sequence[str]) -> None:
    """Per turn, its children to one server and its root to the next at the same instant."""
    barrier = threading.Barrier(2)

    def run(part: int) -> None:
        sends = [sender(exporter_for(http_url=u)) for u in urls]  # exporters of this thread
        for k, turn in enumerate(turns):
            spans = children_of(turn) if part == 0 else root_of(turn)
            barrier.wait(30)
            sends[(k + part) % len(sends)](spans)

    threads = [threading.Thread(target=run, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)


def stored_spans(db_url: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_three_serve_processes_on_one_postgres_keep_every_reference(
    postgres_url: str, tmp_path: Path
) -> None:
    import_refs(postgres_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    phased = [f"{s}-{i}" for s in SCENARIOS for i in range(10)]
    plans = [SCENARIOS[scenario_of(n)][0](n) for n in phased]
    raced = [f"race-{i}" for i in range(40)]
    turns = [agent_turn(n, "w") for n in raced]
    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve_process(postgres_url, tmp_path / f"serve-{i}.log"))
            for i in range(SERVERS)
        ]
        sends: list[Sender] = [sender(exporter_for(http_url=u)) for u in urls]
        send_in_phases(plans, sends)  # each request of a conversation to the next server
        race(turns, urls)
        rows = wait_scored(postgres_url, phased + raced, timeout_s=120)

    names = phased + raced
    wrong = Counter(
        (n.rsplit("-", 1)[0], rows[n]["status"], rows[n]["reference_id"])
        for n in names
        if (rows[n]["status"], rows[n]["reference_id"], rows[n]["expectation_id"])
        != ("scored", "w", "w")
    )
    assert wrong == {}, f"(scenario, status, reference id): conversations of {len(names)}"
    n_conv, n_traces, expectation_of = stored_state(postgres_url)
    traces = sum(SCENARIOS[scenario_of(n)][1] for n in phased) + len(raced)
    assert (n_conv, n_traces) == (len(names), traces), "no trace-keyed conversation left behind"
    assert expectation_of == {n: "w" for n in names}
    sent = sum(len(r) for plan in plans for phase in plan for r in phase)
    sent += sum(len(t) for t in turns)
    assert stored_spans(postgres_url) == sent, "every acknowledged span is stored"
