"""The real OpenAI Agents SDK, traced by Logfire or by OpenInference, reconstructs correctly.

Each mode runs in a fresh process (openai_agents_app.py; the instrumentations are global): the
SDK's Responses and Chat Completions models against a scripted local server, a scripted
``agents.Model``, and the Responses model without sensitive data. No network. Set
``TOOLSCORE_RECORD=1`` to refresh the recordings read by test_logfire_openai_agents.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("logfire")
pytest.importorskip("openinference.instrumentation.openai_agents")

from tests.collector.reconstruction.conventions.test_logfire_openai_agents import (
    MODES,
    SCENARIOS,
    check,
    recording_path,
)
from tests.collector.recording import load_recording

APP = "tests.collector.reconstruction.conventions.openai_agents_app"
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module", params=MODES)
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    outdir = tmp_path_factory.mktemp(request.param)
    subprocess.run(
        [sys.executable, "-m", APP, request.param, str(outdir), *SCENARIOS],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    if os.environ.get("TOOLSCORE_RECORD") == "1":
        for scenario in SCENARIOS:
            target = recording_path(request.param, scenario)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(outdir / f"{scenario}.json", target)
    return request.param, outdir


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_live_run_reconstructs(recorded: tuple[str, Path], scenario: str) -> None:
    mode, outdir = recorded
    check(mode, scenario, load_recording(outdir / f"{scenario}.json"))
