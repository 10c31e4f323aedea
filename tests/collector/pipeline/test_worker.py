"""The worker component: wakes on time, scores in a thread or a child process; serve options."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from tests.collector.pipeline.test_score import REFERENCE, expect, fixture_spans, store
from toolscore.collector.configuration import ConfigError
from toolscore.collector.pipeline.child import ScoringProcess
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.options import (
    add_arguments,
    available_cores,
    options_from,
    processes_for,
)
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.scorer import default_config
from toolscore.storage.expectations.repository import ExpectationData


async def _until_scored(worker: PipelineWorker, timeout_s: float = 60.0) -> float:
    start = time.monotonic()
    await worker.start()
    try:
        while worker.stats.scored < 1:
            assert time.monotonic() - start < timeout_s, "not scored in time"
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
    return time.monotonic() - start


@pytest.mark.parametrize("in_child", [False, True], ids=["thread", "child-process"])
def test_worker_scores_a_settled_conversation(engine: Engine, db_url: str, in_child: bool) -> None:
    spans, _ = fixture_spans("weather")
    store(engine, spans, at_ns=time.time_ns())
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    worker = PipelineWorker(
        engine,
        default_config(),
        timing=Timing(settle_s=0.5, idle_s=0.1),
        poll_s=30,  # only the database's due time can wake it in time
        process=ScoringProcess(db_url) if in_child else None,
    )
    elapsed = asyncio.run(_until_scored(worker))
    assert elapsed >= 0.4, "not before the settle time"
    assert worker.stats.scored == 1 and worker.stats.latency_s[0] >= 0.5


def parse(argv: list[str], environ: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return options_from(parser.parse_args(argv), environ or {})


def test_serve_options_flags_beat_environment() -> None:
    opts = parse(
        ["--settle", "2.5", "--conversation-key", "a", "--conversation-key", "b"],
        {"TOOLSCORE_SETTLE": "9", "TOOLSCORE_CONVERSATION_KEYS": "x,y"},
    )
    assert (opts.settle_s, opts.conversation_keys) == (2.5, ("a", "b"))
    env = parse([], {"TOOLSCORE_SETTLE": "9", "TOOLSCORE_CONVERSATION_KEYS": "x, y"})
    assert (env.settle_s, env.conversation_keys, env.separate_process) == (9.0, ("x", "y"), True)
    default = parse([])
    assert (default.settle_s, default.root_idle_s, default.conversation_keys) == (5.0, 1.0, None)
    assert parse(["--scoring-in-process"]).separate_process is False
    assert parse(["--no-scoring"]).enabled is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--settle", "-1"], "--settle / TOOLSCORE_SETTLE: expected a number of seconds, 0 or"),
        (
            ["--scoring-processes", "0"],
            "--scoring-processes / TOOLSCORE_SCORING_PROCESSES: expected a whole number greater "
            "than 0 or auto, got '0'",
        ),
        (["--scoring-processes", "many"], "PROCESSES: expected a whole number .* got 'many'"),
    ],
)
def test_invalid_serve_options_are_clear_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(argv)


def test_scoring_processes_default_to_one_per_core_up_to_four() -> None:
    auto = parse([])
    assert auto.scoring_processes is None
    assert [processes_for(auto, cores) for cores in (1, 2, 3, 4, 8, 64)] == [1, 2, 3, 4, 4, 4]
    assert processes_for(parse([], {"TOOLSCORE_SCORING_PROCESSES": "AUTO"}), 8) == 4
    assert processes_for(parse(["--scoring-processes", "3"]), 1) == 3
    assert processes_for(parse([], {"TOOLSCORE_SCORING_PROCESSES": "1"}), 8) == 1


def test_the_cores_are_those_this_process_may_run_on() -> None:
    cores = available_cores()
    assert cores >= 1
    if hasattr(os, "sched_getaffinity"):
        assert cores == len(os.sched_getaffinity(0))


def test_invalid_environment_names_the_variable() -> None:
    with pytest.raises(
        ConfigError, match="--settle / TOOLSCORE_SETTLE: expected a number of seconds, got 'soon'"
    ):
        parse([], {"TOOLSCORE_SETTLE": "soon"})


SERVE = [sys.executable, "-m", "toolscore", "serve"]


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_scoring_child_exits_when_the_server_is_killed(sqlite_url: str) -> None:
    serve = subprocess.Popen(
        [*SERVE, "--db", sqlite_url, "--grpc", "off", "--http", "127.0.0.1:0"],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        spawned: list[int] = []
        while not spawned and time.monotonic() < deadline:
            time.sleep(0.2)
            spawned = [
                p
                for p in _children(serve.pid)
                if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
        assert spawned, "serve started no scoring process"
    finally:
        serve.kill()  # SIGKILL: no chance to shut its pool down
        serve.wait(10)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = [p for p in spawned if Path(f"/proc/{p}").exists()]
    assert not alive, f"orphaned scoring processes {alive}"


def _worker_failing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, error: Exception, times: int
) -> PipelineWorker:
    """A worker with one ready conversation whose first ``times`` rounds raise ``error``."""
    spans, _ = fixture_spans("weather")
    store(engine, spans, at_ns=time.time_ns())
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    worker = PipelineWorker(
        engine, default_config(), timing=Timing(settle_s=0.1, idle_s=0.1), poll_s=0.01
    )
    real_round, failures = worker._round, [times]

    async def failing_round() -> object:
        if failures[0]:
            failures[0] -= 1
            raise error
        return await real_round()

    monkeypatch.setattr(worker, "_round", failing_round)
    return worker


def test_a_database_outage_is_one_warning_and_a_resumption_line_not_tracebacks(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    refused = OperationalError("SELECT 1", {}, ConnectionRefusedError("refused"))
    worker = _worker_failing(engine, monkeypatch, refused, times=3)
    with caplog.at_level(logging.DEBUG, logger="toolscore.collector.pipeline.worker"):
        asyncio.run(_until_scored(worker))
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in lines] == ["WARNING", "INFO"]
    assert lines[0][1] == (
        "scoring rounds failing: the database refused the commit (ConnectionRefusedError); "
        "retrying every 0.01 s"
    )
    assert lines[1][1].startswith("scoring rounds resumed after ")
    assert lines[1][1].endswith("(3 failed rounds)")
    assert all(r.exc_info is None for r in caplog.records if r.levelno >= logging.INFO)


def test_a_round_that_fails_for_another_reason_keeps_its_traceback(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    worker = _worker_failing(engine, monkeypatch, TypeError("a bug"), times=1)
    with caplog.at_level(logging.INFO, logger="toolscore.collector.pipeline.worker"):
        asyncio.run(_until_scored(worker))
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors] == ["pipeline round failed; retrying"]
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is TypeError
