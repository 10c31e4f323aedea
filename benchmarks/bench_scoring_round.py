"""CPU of the scoring process per conversation, split by phase, in-process (no server).

Each measurement is a fresh child process: it fills a real database (a new SQLite file, or your
own PostgreSQL database with ``--postgres``, its schema dropped and migrated again) with N
matched 7-span conversations stored as the receiver stores them (``pipeline_load.py``'s OTLP
requests, decoded by ``collector/otlp/decode.py``, ``store_telemetry`` and the ingest hook's
``assign_spans`` in one transaction per request), all ready to score, then runs
``RoundRunner.run_once`` (what the scoring process runs) until nothing is left, in its thread,
and checks every conversation got a scored revision. CPU is the thread's CPU time
(``time.thread_time``); on PostgreSQL the CPU of the database's server processes (backends of
that database, read from /proc: the server must run on the same machine) is reported beside it.

Each run measures each tree twice: once bare (the total CPU per conversation) and once with
every phase's functions wrapped (the split; the wrappers add their own cost, shown as the
difference of the two totals). Phases are exclusive (a phase's time leaves out the phases it
calls): claim (``claim_ready``, ``next_due_ns``), sizes (``span_counts``), heads (the
conversation rows and traces, pruning marks), load (spans and logs read: SQL and rows), decode
(JSON of span columns and ``SpanRecord``s built), reconstruct, match (expectation lookups),
score (the metrics), rows (tool-call and evaluation rows made storable), write (the revision's
statements), commit, other (the rest of the round: connections, Python glue).

``--baseline REF_OR_DIR`` measures another tree side by side (a git ref is extracted with
``git archive`` into a temporary directory), alternating which goes first; it runs with this
venv's packages and this tree's child, so the other tree must have this one's module paths (for
an older layout, run that tree's own script)::

    python benchmarks/bench_scoring_round.py --conversations 4000 --runs 5 --baseline main \\
        [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/scorecpu_bench]

``--profile FILE`` writes a cProfile of one bare pass of this tree (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scoring_round_child import PHASES, child

ROOT = Path(__file__).resolve().parents[1]


# --- the parent: runs, alternation, medians ------------------------------------------------------


def _tree_of(ref_or_dir: str) -> Path:
    if Path(ref_or_dir).is_dir():
        return Path(ref_or_dir).resolve()
    target = Path(tempfile.mkdtemp(prefix="bench-round-baseline-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref_or_dir], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def _measure(
    args: argparse.Namespace, tree: Path | None, phases: bool, profile: str | None = None
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--conversations", str(args.conversations)]
    command += ["--batch", str(args.batch)]
    if tree is not None:
        command += ["--tree", str(tree)]
    if args.postgres:
        command += ["--db", args.postgres]
    if phases:
        command.append("--phases")
    if profile:
        command += ["--profile", profile]
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["scored"] != result["conversations"]:
        raise SystemExit(f"only {result['scored']} of {result['conversations']} were scored")
    return result


def _median(results: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def _report(name: str, bare: list[dict[str, Any]], split: list[dict[str, Any]]) -> dict[str, float]:
    row = {
        "cpu": _median(bare, "cpu_ms_per_conv") * 1e3,
        "wall": _median(bare, "wall_ms_per_conv") * 1e3,
        "server": _median(bare, "server_ms_per_conv") * 1e3,
        "instrumented": _median(split, "cpu_ms_per_conv") * 1e3,
    }
    for phase in PHASES:
        row[phase] = statistics.median(r["phases_us"][phase] for r in split)
    print(
        f"{name:>9}: {row['cpu']:6.1f} us CPU/conv (wall {row['wall']:6.1f} us), "
        f"instrumented {row['instrumented']:6.1f}; rounds {bare[0]['rounds']}; runs "
        + ", ".join(f"{r['cpu_ms_per_conv'] * 1e3:.0f}" for r in bare)
    )
    return row


def _table(rows: dict[str, dict[str, float]]) -> None:
    names = list(rows)
    print("\n| phase (us CPU per conversation) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names) + ("---|" if len(names) == 2 else ""))
    ratio = len(names) == 2
    for key in ("cpu", "server", "wall", "instrumented", *PHASES):
        cells = [f"{rows[n][key]:.1f}" for n in names]
        if ratio:
            base = rows[names[1]][key]
            cells.append(f"{rows[names[0]][key] / base:.2f}x" if base > 0.05 else "-")
        print(f"| {key} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=200, help="RoundRunner batch size")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--postgres", help="a PostgreSQL URL of your own (its schema is dropped each run)"
    )
    parser.add_argument("--baseline", help="a git ref or a directory to measure side by side")
    parser.add_argument("--profile", help="write a cProfile of one bare pass to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    trees: dict[str, Path | None] = {"this": None}
    if args.baseline:
        trees["baseline"] = _tree_of(args.baseline)
    results: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
        name: ([], []) for name in trees
    }
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for run in range(args.runs):
        order = list(trees) if run % 2 == 0 else list(reversed(trees))
        for name in order:
            for phases in (False, True):
                results[name][phases].append(_measure(args, trees[name], phases))
        print(f"run {run + 1}/{args.runs} done; load average {os.getloadavg()}", flush=True)
    if args.profile:
        _measure(args, None, False, args.profile)
    rows = {name: _report(name, *results[name]) for name in trees}
    db = "PostgreSQL" if args.postgres else "SQLite"
    print(f"\n{db}, {args.conversations} conversations, batch {args.batch}, {args.runs} runs")
    _table(rows)


if __name__ == "__main__":
    main()
