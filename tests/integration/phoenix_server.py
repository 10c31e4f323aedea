"""A real Arize Phoenix server for tests, from ``arize-phoenix`` installed in its own venv.

Phoenix pins its own versions of libraries toolscore uses (SQLAlchemy, OpenTelemetry, grpcio),
so it lives in a venv of its own: ``TOOLSCORE_TEST_PHOENIX_VENV`` names it, else
``.phoenix-venv`` at the repository root (what ``.ci/run`` makes). When it is missing the tests
are skipped, unless ``TOOLSCORE_TEST_INSTALL_PHOENIX=1`` lets them create it (a few minutes
and about 900 MB from PyPI).

The server listens on loopback on ephemeral ports (its gRPC receiver binds every address, which
Phoenix does not let one change), with telemetry and external fetches off and its working
directory (a SQLite database) in a temporary directory; ``restart()`` keeps that directory.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 240.0  # a cold start migrates its database; slow on a busy machine


def phoenix_venv() -> Path:
    """The venv holding Phoenix; creates it when allowed, else skips the test."""
    venv = Path(os.environ.get("TOOLSCORE_TEST_PHOENIX_VENV") or REPO / ".phoenix-venv")
    if (venv / "bin" / "phoenix").exists():
        return venv
    if os.environ.get("TOOLSCORE_TEST_INSTALL_PHOENIX") != "1":
        pytest.skip(
            f"no Phoenix in {venv}: `python -m venv .phoenix-venv && .phoenix-venv/bin/pip "
            "install arize-phoenix`, or TOOLSCORE_TEST_INSTALL_PHOENIX=1"
        )
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "arize-phoenix"], check=True)
    return venv


def free_port() -> int:
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as s:
        s.bind(("", 0))  # the gRPC receiver binds every address: the port must be free on all
        return int(s.getsockname()[1])


class PhoenixServer:
    def __init__(self, working_dir: Path) -> None:
        self.venv = phoenix_venv()
        self.working_dir = working_dir
        self.port = free_port()
        self.grpc_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = working_dir / "phoenix.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PhoenixServer:
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_WORKING_DIR": str(self.working_dir),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        }
        for name in list(env):  # the test's own OTel settings are not Phoenix's
            if name.startswith("OTEL_"):
                del env[name]
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                [str(self.venv / "bin" / "phoenix"), "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.working_dir,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Phoenix exited: {self._log.read_text()[-3000:]}")
            if self.get("/healthz", raw=True) == 200:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Phoenix did not start in {START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def get(self, path: str, raw: bool = False) -> Any:
        """GET ``path`` of Phoenix's REST API: its JSON (or, with ``raw``, the status)."""
        import json

        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as reply:
                return reply.status if raw else json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            if raw:
                return exc.code
            raise
        except OSError:
            if raw:
                return None
            raise
