"""Request recordings of real frameworks (tests/fixtures/recorded/<name>/requests.json), decoded
by the receiver's own decoder, rebuild to the four calls of four_calls.py, with nothing else.

The end-to-end tests (tests/integration/test_recorded_requests_e2e.py) send the same requests
to a real server; these check the reconstruction alone, fast, on all the recording's spans and
log records at once (conversation grouping is the end-to-end tests' part).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.collector.otlp_requests import load_requests, records, request_recordings
from toolscore.collector.reconstruction.rebuild import reconstruct

# recording → why its calls are not yet rebuilt exactly; strict, so each flips when they are
NOT_YET: dict[str, str] = {}


def _cases() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=[pytest.mark.xfail(strict=True, reason=NOT_YET[name])] if name in NOT_YET else [],
        )
        for name in request_recordings()
    ]


@pytest.mark.parametrize("name", _cases())
def test_request_recording_rebuilds_its_calls(name: str) -> None:
    recording = load_requests(name)
    spans, logs = records(recording.requests)
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == (
        recording.expected
    )
    assert (result.warnings, result.unread, result.unrecognised) == ((), (), None)
