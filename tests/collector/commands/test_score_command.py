"""``toolscore score`` end to end: the real console script on real files and stdin."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scorer import ragas_oracle

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = Path(sys.executable).with_name("toolscore")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolscore"]


def toolscore(*args: str, stdin: bytes | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, "score", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        **kwargs,
    )


def sample(sid: str, predicted: list[dict], reference: list[dict] | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"type": "human", "content": "hi"}]
    if predicted:
        messages.append({"type": "ai", "content": "", "tool_calls": predicted})
        messages += [{"type": "tool", "content": "ok"} for _ in predicted]
    messages.append({"type": "ai", "content": "done"})
    out: dict[str, Any] = {"id": sid, "user_input": messages}
    if reference is not None:
        out["reference_tool_calls"] = reference
    return out


SEARCH = {"name": "search", "args": {"q": "python"}}
FILTER = {"name": "filter", "args": {"type": "recent"}}
GOOD = sample("good", [SEARCH, FILTER], [SEARCH, FILTER])
SWAPPED = sample("swapped", [FILTER, SEARCH], [SEARCH, FILTER])


def padded(base: dict[str, Any], i: int) -> dict[str, Any]:
    """``base`` with id ``i`` and a 1 kB question: files of these fork (1 MiB per process)."""
    question = {"type": "human", "content": "x" * 1000}
    return dict(base, id=i, user_input=[question, *base["user_input"][1:]])


def outputs(result: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_scores_every_line_in_order_with_default_instances(tmp_path):
    result = toolscore(str(write_jsonl(tmp_path / "s.jsonl", [GOOD, SWAPPED])))
    assert result.returncode == 0, result.stderr
    good, swapped = outputs(result)
    assert list(good) == ["id", "tool_call_accuracy", "tool_call_f1", "details"]
    assert (good["id"], good["tool_call_accuracy"], good["tool_call_f1"]) == ("good", 1.0, 1.0)
    assert (swapped["tool_call_accuracy"], swapped["tool_call_f1"]) == (0.0, 1.0)
    assert swapped["details"]["tool_call_accuracy"]["aligned"] is False
    assert result.stderr == b""  # no progress bar when stderr is not a terminal


def test_malformed_and_refused_lines_get_an_error_naming_the_line_and_the_rest_is_scored(
    tmp_path,
):
    tool_first = {"id": "t", "user_input": [{"type": "tool", "content": "x"}]}
    no_args = sample("n", [{"name": "search"}], [SEARCH])
    unknown_type = {"user_input": [{"type": "system", "content": "x"}], "reference_tool_calls": []}
    null_content = {"user_input": [{"type": "human", "content": None}], "reference_tool_calls": []}
    lines = [GOOD, "{not json", "[1, 2]", tool_first, no_args, unknown_type, null_content, SWAPPED]
    result = toolscore(str(write_jsonl(tmp_path / "s.jsonl", lines)))
    assert result.returncode == 1
    rows = outputs(result)
    assert len(rows) == 8
    assert rows[0]["tool_call_accuracy"] == 1.0 and "error" not in rows[0]
    assert rows[7]["id"] == "swapped" and rows[7]["tool_call_f1"] == 1.0
    errors = [row["error"] for row in rows[1:7]]
    assert errors[0].startswith("line 2: not valid JSON")
    assert errors[1] == "line 3: a sample must be a JSON object, got an array"
    assert errors[2] == "line 4: user_input[0]: a tool message must come after an ai message"
    assert errors[3].startswith("line 5: user_input[1].tool_calls[0].args: missing")
    assert errors[4].startswith("line 6: user_input[0].type: unknown message type 'system'")
    assert errors[5] == "line 7: user_input[0].content: must be a string, got null"
    for row in rows[1:7]:
        assert row["tool_call_accuracy"] is None and row["tool_call_f1"] is None
    assert rows[3]["id"] == "t"  # the id survives when the sample is readable enough


def test_null_reference_gives_null_scores_with_errors_and_a_failing_status(tmp_path):
    result = toolscore(str(write_jsonl(tmp_path / "s.jsonl", [sample("x", [SEARCH], None)])))
    assert result.returncode == 1
    (row,) = outputs(result)
    assert row["tool_call_accuracy"] is None and row["tool_call_f1"] is None
    assert "reference_tool_calls is missing" in row["errors"]["tool_call_accuracy"]


def test_reads_stdin_with_dash_or_without_a_file_argument():
    data = (json.dumps(GOOD) + "\n\n" + json.dumps(SWAPPED) + "\n").encode()
    for args in (("-",), ()):
        result = toolscore(*args, stdin=data)
        assert result.returncode == 0, result.stderr
        assert [row["id"] for row in outputs(result)] == ["good", "swapped"]  # blank line skipped


def test_config_file_defines_the_output_keys_in_file_order(tmp_path):
    config = tmp_path / "scoring.yaml"
    config.write_text(
        "metrics:\n"
        "  any_order: {type: tool_call_accuracy, order: flexible}\n"
        "  fuzzy: {type: tool_call_accuracy, args: levenshtein}\n"
        "  f1: {type: tool_call_f1}\n"
    )
    near = sample("near", [{"name": "search", "args": {"q": "pythn"}}], [SEARCH])
    data = (json.dumps(SWAPPED) + "\n" + json.dumps(near) + "\n").encode()
    result = toolscore("--config", str(config), stdin=data)
    assert result.returncode == 0, result.stderr
    swapped, fuzzy = outputs(result)
    assert list(swapped)[:4] == ["id", "any_order", "fuzzy", "f1"]
    assert swapped["any_order"] == 1.0
    assert fuzzy["fuzzy"] == pytest.approx(1 - 1 / 6)


def test_invalid_config_is_a_usage_error_naming_the_path_and_nothing_is_scored(tmp_path):
    config = tmp_path / "scoring.yaml"
    config.write_text(
        "metrics:\n"
        "  accuracy_fuzzy:\n"
        "    type: tool_call_accuracy\n"
        "    tools:\n"
        "      search: {args: {query: normalised}}\n"
    )
    result = toolscore("--config", str(config), stdin=json.dumps(GOOD).encode())
    assert result.returncode == 2
    assert result.stdout == b""
    assert (
        "metrics.accuracy_fuzzy.tools.search.args.query: unknown comparator 'normalised'"
        in result.stderr.decode()
    )


def test_missing_input_file_is_a_usage_error(tmp_path):
    result = toolscore(str(tmp_path / "nope.jsonl"))
    assert result.returncode == 2
    assert "cannot read" in result.stderr.decode()


def test_reads_a_json_array_document_and_a_pretty_printed_samples_wrapper(tmp_path):
    array = tmp_path / "dataset.json"
    array.write_text(json.dumps([GOOD, SWAPPED], indent=2))
    wrapper = tmp_path / "wrapped.json"
    wrapper.write_text(json.dumps({"samples": [GOOD, SWAPPED], "name": None}, indent=2))
    for path in (array, wrapper):
        result = toolscore(str(path))
        assert result.returncode == 0, result.stderr
        assert [(r["id"], r["tool_call_accuracy"]) for r in outputs(result)] == [
            ("good", 1.0),
            ("swapped", 0.0),
        ]


def test_a_bad_first_line_starting_like_an_array_does_not_hide_the_other_lines(tmp_path):
    result = toolscore(str(write_jsonl(tmp_path / "s.jsonl", ["[1, 2", GOOD])))
    assert result.returncode == 1
    bad, good = outputs(result)
    assert bad["error"].startswith("line 1: not valid JSON")
    assert good["tool_call_accuracy"] == 1.0


def test_integers_beyond_64_bits_and_nan_are_read_as_python_json_reads_them(tmp_path):
    big = "18446744073709551616"
    line = (
        '{"user_input": [{"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": '
        f'{{"n": {big}, "x": NaN}}}}]}}], "reference_tool_calls": [{{"name": "f", "args": '
        f'{{"n": "{big}", "x": "nan"}}}}]}}'
    )
    result = toolscore(stdin=(line + "\n").encode())
    assert result.returncode == 0, result.stderr
    (row,) = outputs(result)
    # str(18446744073709551616) == "18446744073709551616" and str(nan) == "nan": both match
    assert row["tool_call_accuracy"] == 1.0


def test_worker_processes_give_the_same_output_in_the_same_order(tmp_path):
    lines: list[Any] = [padded(GOOD, i) if i % 3 else padded(SWAPPED, i) for i in range(2500)]
    lines[1700] = "{broken"
    path = write_jsonl(tmp_path / "many.jsonl", lines)
    single = toolscore("--jobs", "1", str(path))
    parallel = toolscore("--jobs", "2", str(path))
    default = toolscore(str(path))  # one process per core
    assert single.returncode == parallel.returncode == default.returncode == 1
    assert parallel.stdout == single.stdout == default.stdout
    rows = outputs(parallel)
    assert len(rows) == 2500
    assert rows[1700]["error"].startswith("line 1701: not valid JSON")
    assert [r["id"] for r in rows[:3]] == [0, 1, 2] and rows[2499]["id"] == 2499


def test_a_closed_output_pipe_stops_quietly(tmp_path):
    path = write_jsonl(tmp_path / "many.jsonl", [GOOD] * 5000)
    command = " ".join([*COMMAND, "score", "--jobs", "1", str(path)])
    result = subprocess.run(
        f"{command} | head -n 1", shell=True, capture_output=True, cwd=ROOT, timeout=120
    )
    assert json.loads(result.stdout)["id"] == "good"
    assert b"Traceback" not in result.stderr


HEAVY = ("yaml", "sqlalchemy", "grpc", "rapidfuzz", "scipy", "pydantic", "google.protobuf")


def test_scoring_with_the_default_config_imports_no_heavy_library(tmp_path):
    # Start-up is a large share of `toolscore score` on a file; these are not needed for it.
    path = write_jsonl(tmp_path / "s.jsonl", [GOOD, SWAPPED, "{broken"])
    probe = (
        "import sys; from collector.cli import main; status = main(sys.argv[1:]); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr); "
        "sys.exit(status)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, "score", str(path)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1  # the broken line
    assert len(outputs(result)) == 3
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"


def test_no_details_omits_explanations():
    result = toolscore("--no-details", stdin=json.dumps(GOOD).encode())
    assert result.returncode == 0
    (row,) = outputs(result)
    assert row == {"id": "good", "tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def test_progress_goes_to_stderr_only_when_it_is_a_terminal(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [GOOD] * 300)
    master, slave = pty.openpty()
    try:
        result = subprocess.run(
            [*COMMAND, "score", str(path)],
            stdout=subprocess.PIPE,
            stderr=slave,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        os.close(slave)
        slave = -1
        progress = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            progress += chunk
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    assert result.returncode == 0
    assert b"300 samples" in progress
    assert len(result.stdout.decode().splitlines()) == 300  # stdout stays pure JSON Lines


@ragas_oracle.requires_ragas
def test_ragas_exported_jsonl_scores_like_ragas(tmp_path):
    from ragas import EvaluationDataset

    samples = [GOOD, SWAPPED, sample("partial", [SEARCH], [SEARCH, FILTER])]
    for s in samples:
        s.pop("id")
    path = tmp_path / "ragas.jsonl"
    EvaluationDataset.from_list(samples).to_jsonl(path)
    result = toolscore(str(path))
    assert result.returncode == 0, result.stderr
    rows = outputs(result)
    assert [r["tool_call_accuracy"] for r in rows] == [ragas_oracle.accuracy(s) for s in samples]
    assert [r["tool_call_f1"] for r in rows] == [ragas_oracle.f1(s) for s in samples]


def test_forked_processes_hand_their_rows_through_a_pipe_when_the_output_has_no_descriptor(
    tmp_path,
):
    import io

    from toolscore.collector.offline import engine
    from toolscore.collector.offline.job import Job

    lines: list[Any] = [padded(GOOD, i) if i % 3 else padded(SWAPPED, i) for i in range(3500)]
    lines[3100] = "{broken"  # in the third share
    lines[1200:1201] = ["", "   "]  # blank lines count as lines
    path = write_jsonl(tmp_path / "many.jsonl", lines)
    outputs_by_jobs = {}
    for jobs in (1, 3):
        out = io.BytesIO()
        with path.open("rb") as source:
            status = engine.run(Job(None, True), source, out, jobs=jobs)
        outputs_by_jobs[jobs] = (status, out.getvalue())
    assert outputs_by_jobs[3] == outputs_by_jobs[1]
    assert outputs_by_jobs[1][0] == 1
    rows = outputs_by_jobs[1][1].decode().splitlines()
    assert len(rows) == 3499
    assert json.loads(rows[3099])["error"].startswith("line 3102: not valid JSON")


@pytest.mark.parametrize("share", [0.01, 0.75])  # closed while this process / a child writes
def test_a_closed_output_pipe_stops_quietly_with_forked_processes(tmp_path, share):
    path = write_jsonl(tmp_path / "many.jsonl", [padded(GOOD, i) for i in range(4000)])
    size = len(toolscore("--jobs", "1", str(path)).stdout)
    command = " ".join([*COMMAND, "score", "--jobs", "2", str(path)])
    result = subprocess.run(
        f"{command} | head -c {int(size * share)} | wc -c; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    assert b"Traceback" not in result.stderr, result.stderr
    assert result.stderr == b""
    assert int(result.stdout) == int(size * share)
    assert result.returncode == 1  # stopped early: not every line was written


def _reference_output(lines: list[bytes], details: bool) -> tuple[bytes, int]:
    """What the command must write, by the general path alone and Python's json: each line
    (with its newline, as files are read) decoded by json.loads, scored by scorer.rows (a
    {"samples": [...]} line sample by sample)."""
    from toolscore.scorer import default_config
    from toolscore.scorer.rows import error_row, score_row

    config = default_config()
    out: list[bytes] = []
    failed = False
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw + b"\n")
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                problem = f"{exc.msg} at column {exc.colno}" if exc.lineno == 1 else str(exc)
            else:
                problem = str(exc)
            out.append(_encoded(error_row(config, f"line {number}: not valid JSON: {problem}")))
            failed = True
            continue
        items = [(f"line {number}", obj)]
        if type(obj) is dict and "user_input" not in obj and type(obj.get("samples")) is list:
            items = [(f"line {number}, sample {i}", s) for i, s in enumerate(obj["samples"], 1)]
        for where, one in items:
            row, ok = score_row(config, one, where=where, details=details)
            failed = failed or not ok
            out.append(_encoded(row))
    return b"".join(out), int(failed)


def _encoded(row: Any) -> bytes:
    import orjson

    try:
        return orjson.dumps(row) + b"\n"
    except TypeError:
        return json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"


def _line_strategy() -> Any:
    from hypothesis import strategies as st

    from tests.scorer.strategies import samples

    odd = st.sampled_from(
        [
            b"{broken",
            b"[1, 2]",
            b'"x"',
            b"",
            b"   ",
            b"\t\x0b",
            b'{"a": ',
            b"\xff\xfe",
            b"nul",
            b"1" * 25,
            b"-" + b"9" * 20,
            b"{}",
            b'{"samples": 3}',
            b'{"samples": []}',
            b'{"id": 1,\r"user_input": []}',
            b"NaN",
        ]
    )
    sample_line = samples().map(lambda s: json.dumps(s).encode())
    wrapper = st.lists(samples(), max_size=3).map(lambda s: json.dumps({"samples": s}).encode())
    return st.one_of(sample_line, sample_line, odd, wrapper)


def _run_lines(lines: list[bytes], details: bool, tmp_dir: Path, jobs: int) -> tuple[bytes, int]:
    import io

    from toolscore.collector.offline import engine
    from toolscore.collector.offline.job import Job

    data = b"\n".join([json.dumps(GOOD).encode(), *lines]) + b"\n"
    path = tmp_dir / "lines.jsonl"
    path.write_bytes(data)
    out = io.BytesIO()
    with path.open("rb") as source:
        status = engine.run(Job(None, details), source, out, jobs=jobs)
    streamed = io.BytesIO()  # the same bytes through the pipe/stdin path
    assert engine.run(Job(None, details), io.BytesIO(data), streamed) == status
    assert streamed.getvalue() == out.getvalue()
    return out.getvalue(), status


def test_the_command_writes_what_the_general_path_and_json_give(tmp_path, monkeypatch):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from toolscore.collector.offline import engine, job

    # Tiny blocks and chunks, so that their boundaries fall everywhere.
    monkeypatch.setattr(engine, "SEGMENT_BYTES", 1500)
    monkeypatch.setattr(job, "CHUNK_BYTES", 300)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_line_strategy(), max_size=12), st.booleans())
    def check(lines: list[bytes], details: bool) -> None:
        expected = _reference_output([json.dumps(GOOD).encode(), *lines], details)
        assert _run_lines(lines, details, tmp_path, jobs=1) == expected

    check()


def test_forked_shares_write_what_one_process_writes(tmp_path, monkeypatch):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from toolscore.collector.offline import engine, job

    monkeypatch.setattr(engine, "FORKED_SEGMENT_BYTES", 4000)
    monkeypatch.setattr(job, "CHUNK_BYTES", 300)
    monkeypatch.setattr(engine, "MIN_BYTES_PER_PROCESS", 500)  # fork for small inputs too

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_line_strategy(), min_size=4, max_size=16), st.booleans(), st.integers(2, 3))
    def check(lines: list[bytes], details: bool, jobs: int) -> None:
        expected = _reference_output([json.dumps(GOOD).encode(), *lines], details)
        assert _run_lines(lines, details, tmp_path, jobs=jobs) == expected

    check()


def test_optional_calls_and_alternatives_take_the_best_reading(tmp_path):
    alternatives = {"name": "search", "args": {"q": {"any_of": ["java", "python"]}}}
    optional = {**FILTER, "optional": True}
    lines = [
        sample("any_of", [SEARCH], [alternatives]),
        sample("skipped", [SEARCH], [SEARCH, optional]),
        sample("made", [SEARCH, FILTER], [SEARCH, optional]),
    ]
    result = toolscore(str(write_jsonl(tmp_path / "s.jsonl", lines)))
    assert result.returncode == 0, result.stderr
    scores = {r["id"]: (r["tool_call_accuracy"], r["tool_call_f1"]) for r in outputs(result)}
    assert scores == {"any_of": (1.0, 1.0), "skipped": (1.0, 1.0), "made": (1.0, 1.0)}
