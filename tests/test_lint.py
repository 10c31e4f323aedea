"""Lint and type checks are part of the test suite, so CI enforces them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_reports_no_problems() -> None:
    if shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists():
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    ruff = str(Path(sys.executable).with_name("ruff"))
    result = _run(ruff, "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_reports_no_errors() -> None:
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
