"""A stand-in for Langfuse's public scores API (Langfuse itself needs ClickHouse, Redis and object
storage, none of which runs here), following its documentation:

- ``POST /api/public/scores``: HTTP basic authentication with the project's public and secret
  keys (401 otherwise); a JSON body with ``traceId``, ``name`` and ``value`` (400 otherwise),
  optional ``id`` (the upsert key), ``observationId``, ``comment``, ``dataType``, ``metadata``;
  answers ``{"id": ...}``;
- a score for a trace not ingested yet is answered 404 (what toolscore retries).
"""

from __future__ import annotations

import asyncio
import base64
import threading
import uuid
from typing import Any

from aiohttp import web


class FakeLangfuse:
    def __init__(self, public_key: str = "pk-lf-test", secret_key: str = "sk-lf-test") -> None:
        token = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
        self.authorization = f"Basic {token}"
        self.ingested: set[str] = set()  # trace ids Langfuse has
        self.scores: dict[str, dict[str, Any]] = {}  # by id (upserted)
        self.requests: list[tuple[int, dict[str, Any]]] = []  # (status answered, body)
        self.lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _scores(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        status, answer = self._answer(request.headers.get("Authorization"), body)
        with self.lock:
            self.requests.append((status, body))
        return web.json_response(answer, status=status)

    def _answer(self, auth: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        if auth != self.authorization:
            return 401, {"message": "Invalid credentials"}
        if not isinstance(body, dict) or not all(k in body for k in ("traceId", "name", "value")):
            return 400, {"message": "Invalid request data"}
        if (
            not isinstance(body["value"], int | float)
            or body.get("dataType", "NUMERIC") != "NUMERIC"
        ):
            return 400, {"message": "value must be a number for a NUMERIC score"}
        with self.lock:
            if body["traceId"] not in self.ingested:
                return 404, {"message": "Trace not found"}
            score_id = body.get("id") or str(uuid.uuid4())
            self.scores[score_id] = dict(body)
        return 200, {"id": score_id}

    def start(self) -> FakeLangfuse:
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/api/public/scores", self._scores)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        def main() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        threading.Thread(target=main, daemon=True).start()
        ready.wait(10)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        async def down() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(down(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
