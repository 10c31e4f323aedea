"""Coverage of live traffic through a real ``toolscore serve`` (SQLite file and PostgreSQL) with
recordings of real frameworks over OTLP: per service and agent, conversations seen, matched and
unmatched with the reason, in the ``expectation_coverage`` view, on ``/metrics``, in
``toolscore report``; ``toolscore refs suggest`` lists the unmatched first messages and tool
sequences most often seen."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import requests
from sqlalchemy import text

from tests.collector.commands.test_refs_command import toolscore
from tests.collector.otlp_replay import relabel, replay
from tests.collector.pipeline.e2e import ROOT_IDLE_S, SETTLE_S, import_refs, wait_scored
from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.recording import RECORDED, load_recording
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.upkeep.status import status_extension
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

MASTRA, HAYSTACK = "thread-mastra", "conv-haystack"
GAUGE = "toolscore_expectation_coverage_conversations"


def _gauges(metrics: str) -> dict[tuple[str, str, str], float]:
    found = {}
    for line in metrics.splitlines():
        if m := re.fullmatch(GAUGE + r"\{(.*)\} (\S+)", line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            found[labels["service"], labels["agent"], labels["outcome"]] = float(m.group(2))
    return found


def test_coverage_by_service_and_agent(db_url: str, tmp_path: Path) -> None:
    mastra = load_recording(RECORDED / "mastra-multi-turn.json")
    haystack = load_recording(RECORDED / "haystack-multi-turn.json")
    import_refs(
        db_url,
        ExpectationData(
            "travel", mastra[2], match={"attributes": {"gen_ai.agent.name": "travel-agent"}}
        ),
    )
    extensions = [
        pipeline_extension(PipelineOptions(settle_s=SETTLE_S, root_idle_s=ROOT_IDLE_S)),
        status_extension(poll_s=0.1, log_every_s=60),
    ]
    with RunningServer(server_settings(db_url), extensions) as srv:
        replay(srv, mastra[0], mastra[1])
        replay(srv, haystack[0], haystack[1])
        replay(srv, *relabel(haystack[0], haystack[1], HAYSTACK, f"{HAYSTACK}-2"))
        wait_scored(db_url, [MASTRA, HAYSTACK, f"{HAYSTACK}-2"])
        haystack_service = haystack[0][0].resource_attributes["service.name"]
        expected = {
            ("mastra-app", "travel-agent", "matched"): 1.0,
            (haystack_service, "(unknown)", "unmatched"): 2.0,
        }
        # the next count of conversations: held back 1,000x what a count took beyond 50 ms,
        # seconds on a loaded machine
        deadline = time.monotonic() + 90
        while (gauges := _gauges(requests.get(f"{srv.http_url}/metrics", timeout=5).text)) != (
            expected
        ) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert gauges == expected
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            view = conn.execute(
                text(
                    "SELECT service_name, agent_name, outcome, unmatched_reason, conversations "
                    "FROM expectation_coverage ORDER BY outcome"
                )
            ).all()
    finally:
        engine.dispose()
    assert [(r[0], r[1], r[2], r[4]) for r in view] == [
        ("mastra-app", "travel-agent", "matched", 1),
        (haystack_service, "(unknown)", "unmatched", 2),
    ]
    assert "none of the 1 rule expectations holds for it" in view[1][3]

    html = tmp_path / "report.html"
    period = ("--since", "2000-01-01", "--until", "2100-01-01")
    report = toolscore("report", *period, "--html", str(html), db=db_url)
    assert report.returncode == 0, report.stderr
    page = html.read_text()
    table = page[page.index('<table id="coverage">') :]
    assert "<td>mastra-app</td><td>travel-agent</td>" in table
    assert '<td class="num">1</td><td class="num">1</td><td class="num">0</td>' in table
    coverage = report.stdout[report.stdout.index("Coverage (") :].splitlines()
    assert coverage[1].split()[:6] == ["service", "agent", "seen", "matched", "unmatched", "share"]
    # most seen first
    assert coverage[2].split()[:6] == [haystack_service, "(unknown)", "2", "0", "2", "0%"]
    assert "2x no reference id on its" in coverage[2]  # cut to the terminal width
    assert coverage[3].split()[:6] == ["mastra-app", "travel-agent", "1", "1", "0", "100%"]

    by_message = toolscore("refs", "suggest", "--json", db=db_url)
    assert by_message.returncode == 0, by_message.stderr
    (candidate,) = json.loads(by_message.stdout)
    assert candidate["candidate"] == " ".join(fc.QUESTION_1.split()).casefold()
    assert candidate["conversations"] == 2
    assert candidate["example"] in (HAYSTACK, f"{HAYSTACK}-2")
    by_tools = toolscore("refs", "suggest", "--by", "tools", "--json", db=db_url)
    assert by_tools.returncode == 0, by_tools.stderr
    names = " -> ".join(c["name"] for c in haystack[2])
    assert [(c["candidate"], c["conversations"]) for c in json.loads(by_tools.stdout)] == [
        (names, 2)
    ]
    table = toolscore("refs", "suggest", db=db_url).stdout.splitlines()
    assert table[0].split() == ["CONVERSATIONS", "CANDIDATE", "EXAMPLE"]
    assert table[2].split()[:2] == ["2", "what's"]
