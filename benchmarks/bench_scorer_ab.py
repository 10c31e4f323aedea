"""The scorer, this tree against another (a git worktree of the previous version), in one run.

    git worktree add --detach /tmp/before main      # before the change
    .venv/bin/python benchmarks/bench_scorer_ab.py /tmp/before [--samples 10000] [--runs 7]

Each tree is imported through a tree of links in its ``.typecheck/toolscore`` (the installed
layout, built as ``scripts/check.py`` does) put first on ``PYTHONPATH``, so both run with this
virtualenv, and this script's tree is measured even when the editable install points elsewhere.
Same samples as ``bench_scorer.py``. Each run times, for both trees in turn (runs interleaved,
so a change of load on a shared machine falls on both alike): ``toolscore score`` end to end
(``--jobs 1``, with and without explanations), its start-up on a 10-sample file (wall and CPU,
``--startup-runs`` runs per round), and the in-process core (``MetricInstance.value`` and
``MetricInstance.score`` of the default accuracy, and the command's loop ``Job.score_lines``,
raw lines to output bytes). Prints medians and the ratio this / other (below 1 is faster).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_scorer import make_samples, run_cli  # noqa: E402
from check import link_tree  # noqa: E402

# One in-process pass of the core, printed as JSON seconds (CPU time: steadier than wall).
_CORE = """
import gc, json, sys, time, orjson
from toolscore.scorer import default_config, parse_sample
from toolscore.collector.offline.job import Job
lines = open(sys.argv[1], 'rb').read().splitlines()
samples = [orjson.loads(line) for line in lines]
parsed = [parse_sample(s) for s in samples]
accuracy = default_config().instances['tool_call_accuracy']
out = {}
def clock(label, fn):
    gc.collect(); gc.disable(); start = time.process_time(); fn()
    out[label] = time.process_time() - start; gc.enable()
clock('core value', lambda: [accuracy.value(s.predicted_tool_calls, s.reference_tool_calls)
                             for s in parsed])
clock('core score', lambda: [accuracy.score(s.predicted_tool_calls, s.reference_tool_calls)
                             for s in parsed])
raw = [line + b"\\n" for line in lines]
clock('Job.score_lines', lambda: Job(None, True).score_lines(1, raw, False))
print(json.dumps(out))
"""


def core_times(path: Path, envs: dict[str, dict[str, str]], runs: int) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {}
    for _ in range(runs):
        for tree, env in envs.items():
            proc = subprocess.run(
                [sys.executable, "-c", _CORE, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            for label, seconds in json.loads(proc.stdout).items():
                seen.setdefault(f"{label} [{tree}]", []).append(seconds)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other source tree (previous version)")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--startup-runs", type=int, default=20)
    args = parser.parse_args()
    this, other = link_tree(ROOT).parent, link_tree(args.other.resolve()).parent
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {
            "this": {**base, "PYTHONPYCACHEPREFIX": f"{tmp}/pc-this", "PYTHONPATH": str(this)},
            "other": {**base, "PYTHONPYCACHEPREFIX": f"{tmp}/pc-other", "PYTHONPATH": str(other)},
        }
        path = Path(tmp) / "samples.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in make_samples(args.samples)))
        cli: dict[str, list[float]] = {}
        for _ in range(args.runs):  # one CLI run per tree and variant each round
            for tree, env in envs.items():
                for variant, flags in (("score --jobs 1", []), ("--no-details", ["--no-details"])):
                    got = run_cli({"v": ["--jobs", "1", *flags, str(path)]}, 1, env)["v"]
                    cli.setdefault(f"toolscore {variant} [{tree}]", []).append(got[0][1])
        times = {**core_times(path, envs, args.runs), **cli}
        small = Path(tmp) / "ten.jsonl"
        small.write_text("".join(json.dumps(s) + "\n" for s in make_samples(10)))
        startup = startup_times(small, envs, args.startup_runs)
    print(f"{args.samples:,} samples, median CPU seconds of {args.runs} runs; this / other")
    _print(times)
    print(f"toolscore score on 10 samples (start-up), medians of {args.startup_runs} runs, seconds")
    _print(startup)
    return 0


def startup_times(path: Path, envs: dict[str, dict[str, str]], runs: int) -> dict[str, list[float]]:
    """``toolscore score --jobs 1`` on a small file: wall and CPU seconds, runs interleaved."""
    seen: dict[str, list[float]] = {}
    for env in envs.values():  # writes the bytecode cache, untimed
        run_cli({"v": ["--jobs", "1", str(path)]}, 1, env)
    for _ in range(runs):
        for tree, env in envs.items():
            (wall, cpu), _, _ = run_cli({"v": ["--jobs", "1", str(path)]}, 1, env)["v"]
            seen.setdefault(f"start-up, wall [{tree}]", []).append(wall)
            seen.setdefault(f"start-up, CPU [{tree}]", []).append(cpu)
    return seen


def _print(times: dict[str, list[float]]) -> None:
    for label in sorted({k.rsplit(" [", 1)[0] for k in times}):
        mine = statistics.median(times[f"{label} [this]"])
        theirs = statistics.median(times[f"{label} [other]"])
        print(f"  {label:28} this {mine:7.3f}  other {theirs:7.3f}  ratio {mine / theirs:5.3f}")


if __name__ == "__main__":
    sys.exit(main())
