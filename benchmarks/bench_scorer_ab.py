"""The scorer, this tree against another (a git worktree of the previous version), in one run.

    git worktree add --detach /tmp/before main      # before the change
    .venv/bin/python benchmarks/bench_scorer_ab.py /tmp/before [--samples 10000] [--runs 7]

Each tree is imported through a tree of links in its ``.typecheck/toolscore`` (the installed
layout, built as ``scripts/check.py`` does) put first on ``PYTHONPATH``, so both run with this
virtualenv, and this script's tree is measured even when the editable install points elsewhere.
Same samples as ``bench_scorer.py``. Each run times, for both trees in turn (runs interleaved,
so a change of load on a shared machine falls on both alike): ``toolscore score`` end to end
(``--jobs 1``, with and without explanations) and the in-process core (``MetricInstance.value``
and ``MetricInstance.score`` of the default accuracy, and ``bulk.fast_row`` on decoded lines).
Prints medians and the ratio this / other (below 1 is faster).
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
from toolscore.scorer import bulk
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
plan = bulk.DEFAULT_PLAN
clock('bulk.fast_row', lambda: [bulk.fast_row(plan, orjson.loads(line)) for line in lines])
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
    print(f"{args.samples:,} samples, median CPU seconds of {args.runs} runs; this / other")
    labels = sorted({k.rsplit(" [", 1)[0] for k in times})
    for label in labels:
        mine = statistics.median(times[f"{label} [this]"])
        theirs = statistics.median(times[f"{label} [other]"])
        print(f"  {label:28} this {mine:7.3f}  other {theirs:7.3f}  ratio {mine / theirs:5.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
