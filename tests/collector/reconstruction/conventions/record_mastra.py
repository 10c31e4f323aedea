"""Record real Mastra spans into tests/fixtures/recorded/mastra-multi-turn.json (run by hand).

Mastra is a Node.js framework; the suite replays the recording without it. To refresh it::

    mkdir -p /tmp/mastra-rec && cp tests/collector/reconstruction/conventions/mastra/package.json \
        /tmp/mastra-rec/
    npm install --prefix /tmp/mastra-rec
    PYTHONPATH=. .venv/bin/python tests/collector/reconstruction/conventions/record_mastra.py \
        /tmp/mastra-rec

(or ``npm install`` inside tests/collector/reconstruction/conventions/mastra and pass that folder).
This starts the scripted chat-completions server (scripted_chat_server.py) with the steps of
four_calls.py, copies mastra/record_mastra.mjs beside the installed node_modules and runs it: a
Mastra ``Agent`` with Mastra's model router pointed at the server, exporting through
``@mastra/otel-exporter`` into an in-memory span exporter. Turn 2 sends turn 1's messages back
(no Mastra memory store); the conversation is Mastra's ``threadId`` metadata.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.reconstruction.conventions.scripted_chat_server import ScriptedChatServer, Step
from tests.collector.recording import RECORDED

HERE = Path(__file__).resolve().parent
THREAD = "thread-mastra"


def record(modules_dir: Path) -> dict[str, Any]:
    steps: list[Step] = []
    for turn, answer in zip(fc.TURNS, fc.ANSWERS, strict=True):
        steps += [*turn, answer]
    script = modules_dir / "record_mastra.mjs"
    shutil.copy(HERE / "mastra" / "record_mastra.mjs", script)
    out = modules_dir / "mastra-out.json"
    scenario = json.dumps({"questions": fc.QUESTIONS, "thread": THREAD})
    with ScriptedChatServer(steps) as server:
        subprocess.run(
            ["node", str(script), server.url, str(out), scenario],
            cwd=modules_dir,
            check=True,
            timeout=120,
        )
        assert not server.steps, f"{len(server.steps)} scripted steps left unused"
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def main(modules_dir: Path) -> None:
    result = record(modules_dir)
    assert result["answers"] == fc.ANSWERS, result["answers"]
    spans = sorted(result["spans"], key=lambda s: int(s["start_ns"]))
    for span in spans:  # nanoseconds as numbers, like the Python recordings
        span["start_ns"], span["end_ns"] = int(span["start_ns"]), int(span["end_ns"])
        for event in span["events"]:
            event["time_ns"] = int(event["time_ns"])
    versions = json.loads((HERE / "mastra" / "package.json").read_text())["dependencies"]
    document = {
        "_note": (
            f"Recorded from @mastra/core {versions['@mastra/core']} with @mastra/otel-exporter "
            f"{versions['@mastra/otel-exporter']} (Agent, model router on a scripted "
            f"chat-completions server) by {__name__}: the two turns of four_calls.py."
        ),
        "spans": spans,
        "logs": [],
        "expected_tool_calls": fc.EXPECTED,
    }
    path = RECORDED / "mastra-multi-turn.json"
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "mastra")
