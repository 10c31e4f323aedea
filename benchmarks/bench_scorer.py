"""Scorer throughput: toolscore vs Ragas 0.4.3 on the same samples, in one run.

    .venv/bin/python benchmarks/bench_scorer.py [--samples 10000] [--runs 5]

Scores the same N samples (3 calls each; a seeded mix of 40% exact, 30% one wrong argument and
30% two calls swapped) with:
  * ``toolscore score`` end to end on a JSONL file (subprocess, default config = accuracy + F1
    with explanations, output to /dev/null, bytecode cached as after an installed package's
    first run): as by default (one process per core), in one process, in two, and without
    explanations, the runs of these variants interleaved; its start-up (empty input) is reported
    separately and included in those rows, and one process's CPU time is broken down by stage
    (in-process);
  * toolscore core, value only (``MetricInstance.value``: strict order, exact comparator);
  * toolscore core with explanations (``MetricInstance.score``);
  * ``ragas.metrics.ToolCallAccuracy`` (legacy API, ``_multi_turn_ascore`` on one event loop);
  * ``ragas.metrics.collections.ToolCallAccuracy`` (``ascore`` driven without an event loop; its
    pydantic message/ToolCall construction is done beforehand and not timed).
Reports medians of ``--runs`` runs: wall seconds and samples/s, CPU seconds and samples per
CPU-second (steadier than wall time on a shared machine), ratios against both Ragas APIs, and
peak RSS. Checks that toolscore and both Ragas APIs gave the same scores.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOOLS = {
    "get_weather": lambda r: {"city": r.choice(["Paris", "Tokyo", "Lima"]), "unit": "c"},
    "get_time": lambda r: {"timezone": r.choice(["Asia/Tokyo", "Europe/Paris"])},
    "search": lambda r: {"query": r.choice(["python", "rust", "otel"]), "limit": r.randint(1, 20)},
    "book_table": lambda r: {"restaurant": "Chez Nous", "people": r.randint(1, 6), "time": "20:00"},
}


def make_samples(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """40% exact, 30% one wrong argument, 30% two calls swapped."""
    rng = random.Random(seed)
    names = list(TOOLS)
    samples = []
    for i in range(n):
        reference = [{"name": t, "args": TOOLS[t](rng)} for t in rng.sample(names, 3)]
        predicted = [{"name": c["name"], "args": dict(c["args"])} for c in reference]
        kind = rng.random()
        if 0.4 <= kind < 0.7:
            victim = predicted[rng.randrange(3)]["args"]
            key = rng.choice(list(victim))
            victim[key] = f"{victim[key]}x"
        elif kind >= 0.7:
            predicted[0], predicted[1] = predicted[1], predicted[0]
        messages: list[dict[str, Any]] = [
            {"type": "human", "content": "Plan my evening in Paris, please."},
            {"type": "ai", "content": "", "tool_calls": predicted},
        ]
        messages += [{"type": "tool", "content": "ok"} for _ in predicted]
        messages.append({"type": "ai", "content": "All set."})
        samples.append({"id": f"s{i}", "user_input": messages, "reference_tool_calls": reference})
    return samples


Timing = tuple[float, float]  # median wall seconds, median CPU seconds


def timed(fn: Callable[[], list[float | None]], runs: int) -> tuple[Timing, list[float | None]]:
    walls, cpus, result = [], [], []
    for _ in range(runs):
        gc.collect()
        gc.disable()  # as timeit does: the collector's passes over a big heap are noise here
        cpu, start = time.process_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        gc.enable()
    return (statistics.median(walls), statistics.median(cpus)), result


# The command is launched and timed from a small helper: a child forked from this (large)
# process would be charged this process's pages in its peak RSS. The helper's own start-up is
# not in the figures. It also notes how many other tasks were runnable when the command started
# (the load it met on a shared machine).
_HELPER = (
    "import resource, subprocess, sys, time; "
    "busy = int(open('/proc/loadavg').read().split()[3].split('/')[0]) - 1; "
    "start = time.perf_counter(); "
    "code = subprocess.run(sys.argv[1:]).returncode; wall = time.perf_counter() - start; "
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(usage.ru_maxrss, wall, usage.ru_utime + usage.ru_stime, busy, file=sys.stderr); "
    "sys.exit(code)"
)

CliResult = tuple[Timing, float, float]  # median (wall, CPU), peak RSS MiB, median busy tasks


def run_cli(variants: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, CliResult]:
    """Per variant (command-line arguments): median wall and CPU seconds (the command and its
    forked processes), peak RSS (MiB) and the median number of other runnable tasks at start.

    The variants' runs are interleaved, so that a change of load on a shared machine falls on
    all of them alike.
    """
    seen: dict[str, list[tuple[float, float, float, float]]] = {v: [] for v in variants}
    for _ in range(runs):
        for name, args in variants.items():
            proc = subprocess.run(
                [sys.executable, "-c", _HELPER, sys.executable, "-m", "toolscore", "score", *args],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
                env=env,
            )
            if proc.returncode != 0:
                raise SystemExit(f"toolscore score {' '.join(args)} failed: {proc.stderr}")
            rss, wall, cpu, busy = proc.stderr.strip().splitlines()[-1].split()
            seen[name].append((float(wall), float(cpu), int(rss) / 1024, float(busy)))
    return {
        name: (
            (statistics.median(r[0] for r in got), statistics.median(r[1] for r in got)),
            max(r[2] for r in got),
            statistics.median(r[3] for r in got),
        )
        for name, got in seen.items()
    }


def breakdown(data: bytes, runs: int) -> list[tuple[str, float]]:
    """Seconds of each stage of ``toolscore score``'s one-process path, in-process.

    Each sample goes through the stages one after the other, as in the command (its objects
    fresh in the cache), each stage timed with ``perf_counter_ns`` less the timer's own cost;
    the median of ``runs`` runs of each stage's total.
    """
    import orjson

    from toolscore.collector.offline.engine import run
    from toolscore.collector.offline.job import Job
    from toolscore.scorer import default_config
    from toolscore.scorer.parse import read_calls
    from toolscore.scorer.rows import score_row
    from toolscore.storage.plumbing.jsoncodec import LineCodec

    lines = data.splitlines(keepends=True)
    config, codec, clock = default_config(), LineCodec(), time.perf_counter_ns
    accuracy = config.instances["tool_call_accuracy"].metric
    f1 = config.instances["tool_call_f1"].metric
    labels = [
        "decode: orjson.loads",
        "read the sample (parse.read_calls)",
        "ToolCallAccuracy + explanation (evaluate)",
        "ToolCallF1 + explanation (evaluate)",
        "whole row (rows.score_row: the 3 above + row dicts)",
        "encode: orjson.dumps + newline",
        "long-number test (one per 64 KiB chunk)",
        "all: run(), bytes in memory to bytes in memory",
    ]
    empty = min(-(clock() - clock()) for _ in range(1000))  # the timer's own cost
    totals: list[list[float]] = [[] for _ in labels]
    for _ in range(runs):
        spent = [0] * len(labels)
        gc.collect()
        gc.disable()
        for line in lines:
            t0 = clock()
            obj = orjson.loads(line)
            t1 = clock()
            _, predicted, reference = read_calls(obj)
            t2 = clock()
            accuracy.evaluate(predicted, reference)  # type: ignore[arg-type]
            t3 = clock()
            f1.evaluate(predicted, reference)  # type: ignore[arg-type]
            t4 = clock()
            row = score_row(config, obj, where="line 1")[0]
            t5 = clock()
            orjson.dumps(row) + b"\n"
            t6 = clock()
            spent[0] += t1 - t0 - empty
            spent[1] += t2 - t1 - empty
            spent[2] += t3 - t2 - empty
            spent[3] += t4 - t3 - empty
            spent[4] += t5 - t4 - empty
            spent[5] += t6 - t5 - empty
        t0 = clock()
        for i in range(0, len(data), 64 << 10):
            codec.has_long_numbers(data[i : i + (64 << 10)])
        spent[6] = clock() - t0
        t0 = clock()
        run(Job(None, True), io.BytesIO(data), io.BytesIO())
        spent[7] = clock() - t0
        gc.enable()
        for i, value in enumerate(spent):
            totals[i].append(value / 1e9)
    return [(label, statistics.median(t)) for label, t in zip(labels, totals, strict=True)]


def drive(coro: Any) -> Any:
    """Run a coroutine that never suspends, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("coroutine suspended")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    n, runs = args.samples, args.runs
    samples = make_samples(n)
    # The command first, while this process is still small (its children's RSS is measured).
    cli, stages = _command_runs(samples, runs)
    rows, results = _core_rows(samples, runs)
    peer_rows, peer_results = _ragas_rows(samples, runs)
    rows += peer_rows
    results.update(peer_results)
    rows.append(("toolscore score (CLI, default)", cli["default"][0]))
    rows.append(("toolscore score --jobs 1 (CLI)", cli["one"][0]))
    rows.append(("toolscore score --jobs 2 (CLI)", cli["two"][0]))
    rows.append(("toolscore score --no-details (CLI)", cli["bare"][0]))
    reference_scores = results["toolscore core (value)"]
    for label, scores in results.items():
        if scores != reference_scores:
            print(f"MISMATCH: {label} disagrees with toolscore on some samples", file=sys.stderr)
    _report(n, runs, rows, cli, stages)
    return 0


def _command_runs(
    samples: list[dict[str, Any]], runs: int
) -> tuple[dict[str, CliResult], list[tuple[str, float]]]:
    """``toolscore score`` on the samples in its variants, and where one process's time goes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "samples.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        empty = Path(tmp) / "empty.jsonl"
        empty.write_text("")
        # As an installed package runs after its first use: with its bytecode cached (in a
        # private cache, whatever PYTHONDONTWRITEBYTECODE says), warmed by one untimed run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        run_cli({"warm-up": [str(empty)]}, 1, env)
        cli = run_cli(
            {
                "startup": [str(empty)],
                "default": [str(path)],
                "one": ["--jobs", "1", str(path)],
                "two": ["--jobs", "2", str(path)],
                "bare": ["--no-details", str(path)],
            },
            runs,
            env,
        )
        return cli, breakdown(path.read_bytes(), runs)


Rows = list[tuple[str, Timing]]
Results = dict[str, list[float | None]]


def _core_rows(samples: list[dict[str, Any]], runs: int) -> tuple[Rows, Results]:
    """toolscore's metric in this process: its value alone, and with its details."""
    from toolscore.scorer import default_config, parse_sample

    parsed = [parse_sample(s) for s in samples]
    accuracy = default_config().instances["tool_call_accuracy"]
    rows: Rows = []
    results: Results = {}

    def core_value() -> list[float | None]:
        return [accuracy.value(s.predicted_tool_calls, s.reference_tool_calls) for s in parsed]

    def core_score() -> list[float | None]:
        return [
            accuracy.score(s.predicted_tool_calls, s.reference_tool_calls).value for s in parsed
        ]

    for label, fn in (
        ("toolscore core (value)", core_value),
        ("toolscore core (+details)", core_score),
    ):
        seconds, results[label] = timed(fn, runs)
        rows.append((label, seconds))
    return rows, results


def _ragas_rows(samples: list[dict[str, Any]], runs: int) -> tuple[Rows, Results]:
    """The peer: Ragas's legacy and collections ToolCallAccuracy (none when not importable)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ragas.dataset_schema import MultiTurnSample
            from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
            from ragas.metrics import ToolCallAccuracy as LegacyAccuracy
            from ragas.metrics.collections import ToolCallAccuracy as CollectionsAccuracy
    except Exception as exc:
        print(f"Ragas not importable ({exc}); comparing toolscore only", file=sys.stderr)
        return [], {}
    warnings.simplefilter("ignore")
    ragas_samples = [MultiTurnSample(**s) for s in samples]
    legacy = LegacyAccuracy()
    loop = asyncio.new_event_loop()

    def run_legacy() -> list[float | None]:
        return [loop.run_until_complete(legacy._multi_turn_ascore(s, None)) for s in ragas_samples]

    kinds = {"human": HumanMessage, "ai": AIMessage, "tool": ToolMessage}
    built = [
        (
            [kinds[m["type"]](**m) for m in s["user_input"]],
            [ToolCall(**c) for c in s["reference_tool_calls"]],
        )
        for s in samples
    ]
    collections = CollectionsAccuracy()

    def run_collections() -> list[float | None]:
        return [
            drive(collections.ascore(user_input=u, reference_tool_calls=r)).value for u, r in built
        ]

    rows: Rows = []
    results: Results = {}
    for label, fn in (
        ("ragas.metrics.ToolCallAccuracy", run_legacy),
        ("ragas collections ToolCallAccuracy", run_collections),
    ):
        seconds, results[label] = timed(fn, max(1, runs if "collections" in label else 3))
        rows.append((label, seconds))
    return rows, results


def _report(
    n: int,
    runs: int,
    rows: Rows,
    cli: dict[str, CliResult],
    stages: list[tuple[str, float]],
) -> None:
    startup, one = cli["startup"][0], cli["one"][0]
    print(
        f"{n:,} samples x 3 calls, median of {runs} runs; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}"
    )
    walls = {label: t[0] for label, t in rows}
    peers = [label for label in walls if label.startswith("ragas")]
    short = {p: "vs legacy" if "collections" not in p else "vs collections" for p in peers}
    header = f"{'':36} {'wall s':>7} {'samples/s':>10} {'CPU s':>7} {'per CPU-s':>10}"
    print(header + "".join(f"  {short[p]:>15}" for p in peers))
    for label, (wall, cpu) in rows:
        ratios = "".join(f"  {walls[p] / wall:>14.1f}x" for p in peers)
        print(
            f"{label:36} {wall:7.3f} {n / wall:10,.0f} {cpu:7.3f} "
            f"{n / max(cpu, 1e-9):10,.0f}{ratios}"
        )
    print(
        f"toolscore score startup (empty input): {startup[0]:.3f} s wall, {startup[1]:.3f} s CPU "
        "(included in the CLI rows)"
    )
    per_cpu = n / max(one[1] - startup[1], 1e-9)
    print(f"toolscore score, 1 process, excluding start-up: {per_cpu:,.0f} samples per CPU-s")
    print("where one process's time goes, in-process, µs per sample (wall, medians):")
    for label, seconds in stages:
        print(f"  {label:54} {seconds * 1e6 / n:6.2f}")
    print(
        "other runnable tasks when the command started (median, from /proc/loadavg): "
        f"{statistics.median(c[2] for c in cli.values()):.1f}"
    )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"peak RSS: toolscore score {cli['one'][1]:.0f} MiB (1 process), {cli['two'][1]:.0f} MiB "
        f"(the largest of 2 processes); this process {own:.0f} MiB (Ragas, its pydantic samples "
        "and ours)"
    )


if __name__ == "__main__":
    sys.exit(main())
