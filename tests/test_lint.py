"""Lint and type checks are part of the test suite, so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_and_mypy_strict_report_no_problems() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
