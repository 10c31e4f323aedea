"""The web UI's HTTP side: routes, the bearer token, cross-site request checks, its listener.

Pages are rendered on the server (Jinja2, autoescaped: span-derived text is always text) and
work without JavaScript; ``ui.js`` only refreshes the conversations list while it is open.
Database reads run in worker threads so a slow query never stalls the event loop (and, in
``serve``, never the OTLP receivers sharing it).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from toolscore.collector.ui import pages
from toolscore.collector.ui.cache import Cached
from toolscore.collector.ui.render import render
from toolscore.storage.database import Engine

log = logging.getLogger("toolscore.ui")

STATIC = Path(__file__).parent / "static"
COOKIE = "toolscore_ui"
FIGURES_TTL_S = 30.0  # the overview's period figures: recomputed at most this often
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Pages only load their own styles and script; nothing may frame them.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class UiConfig:
    """What the UI serves and how it is protected."""

    engine: Engine
    auth_token: str | None = None
    scoring_config: Any | None = None  # for re-scoring (None: the default metrics)
    live: pages.LiveStatus | None = None  # serve's ingest and backlog figures, when in serve
    changed: Any | None = None  # a Signal emitted when scores were written (serve)


def _cookie_value(token: str) -> str:
    """What the session cookie holds: a digest of the token, never the token itself."""
    return hashlib.sha256(f"toolscore-ui:{token}".encode()).hexdigest()


class Ui:
    """The aiohttp application of the UI, with its auth and cross-site checks."""

    def __init__(self, config: UiConfig) -> None:
        self.config = config
        self._csrf_key = secrets.token_bytes(32)
        self._figures = Cached(ttl_s=FIGURES_TTL_S)
        if config.changed is not None:
            config.changed.subscribe(lambda: self._figures.invalidate("overview"))
        self.app = web.Application(middlewares=[self._headers, self._auth])
        self.app.add_routes(
            [
                web.get("/", self.overview),
                web.get("/conversations", self.conversations),
                web.get("/conversations/rows", self.conversation_rows),
                web.get("/conversation", self.conversation),
                web.post("/conversation/rescore", self.rescore),
                web.post("/conversation/promote", self.promote),
                web.post("/conversation/promote/import", self.promote_import),
                web.get("/expectations", self.expectations),
                web.get("/expectation", self.expectation),
                web.get("/login", self.login_form),
                web.post("/login", self.login),
                web.static("/static", STATIC, show_index=False),
            ]
        )

    # --- protection ---------------------------------------------------------------------------

    @web.middleware
    async def _headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = self.config.auth_token
        if token is None or request.path in ("/login",) or request.path.startswith("/static/"):
            return await handler(request)
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer ") and hmac.compare_digest(
            header[7:].encode(), token.encode()
        ):
            return await handler(request)
        cookie = request.cookies.get(COOKIE, "")
        if hmac.compare_digest(cookie.encode(), _cookie_value(token).encode()):
            return await handler(request)
        if request.method == "GET":
            raise web.HTTPSeeOther(f"/login?next={_quote(request.path_qs)}")
        raise web.HTTPUnauthorized(text="a bearer token is required")

    def csrf_token(self) -> str:
        return hmac.new(self._csrf_key, b"ui-form", hashlib.sha256).hexdigest()

    async def _checked_form(self, request: web.Request) -> dict[str, str]:
        """The posted form, after checking it came from one of these pages."""
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="cross-site request refused")
        form = await request.post()
        sent = str(form.get("csrf", ""))
        if not hmac.compare_digest(sent.encode(), self.csrf_token().encode()):
            raise web.HTTPForbidden(text="missing or stale form token: reload the page")
        return {k: str(v) for k, v in form.items()}

    # --- pages ------------------------------------------------------------------------------

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, self.config.engine, *args)

    def _page(self, template: str, **context: Any) -> web.Response:
        context.setdefault("csrf", self.csrf_token())
        context.setdefault("auth", self.config.auth_token is not None)
        return web.Response(text=render(template, **context), content_type="text/html")

    async def _aggregates(self) -> dict[str, Any]:
        """The period figures; while the first computation runs (long on a large history),
        pages get an empty set that says so instead of waiting for it."""
        compute = lambda: self._read(pages.aggregates)  # noqa: E731
        if not self._figures.ready("overview"):
            self._figures.start("overview", compute)
            return pages.pending_figures()
        figures: dict[str, Any] = await self._figures.get("overview", compute)
        return figures

    def warm(self) -> None:
        """Start computing the overview's figures now, before anyone asks."""
        self._figures.start("overview", lambda: self._read(pages.aggregates))

    async def overview(self, request: web.Request) -> web.Response:
        data = await self._read(pages.overview, await self._aggregates(), self.config.live)
        return self._page("overview.html", **data)

    async def conversations(self, request: web.Request) -> web.Response:
        data = await self._read(pages.conversation_list, dict(request.query))
        return self._page("conversations.html", **data)

    async def conversation_rows(self, request: web.Request) -> web.Response:
        data = await self._read(pages.conversation_list, dict(request.query))
        return self._page("conversation_rows.html", **data)

    async def conversation(self, request: web.Request) -> web.Response:
        cid = request.query.get("id")
        if not cid:
            raise web.HTTPBadRequest(text="which conversation? (?id=...)")
        revision = _int(request.query.get("revision"))
        data = await self._read(pages.conversation, cid, revision)
        if data is None:
            raise web.HTTPNotFound(text="no such conversation")
        data["notice"] = request.query.get("notice")
        return self._page("conversation.html", **data)

    async def rescore(self, request: web.Request) -> web.Response:
        form = await self._checked_form(request)
        cid = form.get("id", "")
        notice = await self._read(pages.rescore, cid, self.config.scoring_config)
        raise web.HTTPSeeOther(f"/conversation?id={_quote(cid)}&notice={_quote(notice)}")

    async def promote(self, request: web.Request) -> web.Response:
        form = await self._checked_form(request)
        data = await self._read(pages.promote_preview, form.get("id", ""), form)
        return self._page("promote.html", **data)

    async def promote_import(self, request: web.Request) -> web.Response:
        from toolscore.collector.expectations.promote import PromoteError

        form = await self._checked_form(request)
        try:
            eid = await self._read(pages.promote_import, form.get("id", ""), form)
        except PromoteError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        raise web.HTTPSeeOther(f"/expectation?id={_quote(eid)}")

    async def expectations(self, request: web.Request) -> web.Response:
        data = await self._read(pages.expectation_list, await self._aggregates())
        return self._page("expectations.html", **data)

    async def expectation(self, request: web.Request) -> web.Response:
        eid = request.query.get("id")
        if not eid:
            raise web.HTTPBadRequest(text="which expectation? (?id=...)")
        data = await self._read(pages.expectation, eid, await self._aggregates())
        if data is None:
            raise web.HTTPNotFound(text="no such expectation")
        return self._page("expectation.html", **data)

    async def login_form(self, request: web.Request) -> web.Response:
        return self._page("login.html", next=_safe_next(request.query.get("next")), failed=False)

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token, target = str(form.get("token", "")), _safe_next(str(form.get("next", "/")))
        expected = self.config.auth_token or ""
        if not hmac.compare_digest(token.encode(), expected.encode()):
            response = self._page("login.html", next=target, failed=True)
            response.set_status(401)
            return response
        response = web.HTTPSeeOther(target)
        response.set_cookie(
            COOKIE, _cookie_value(expected), httponly=True, samesite="Strict", path="/"
        )
        raise response


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        raise web.HTTPBadRequest(text="revision must be a number") from None


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _safe_next(target: str | None) -> str:
    """Only a path on this site (no scheme, no host): the login never redirects elsewhere."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class UiServer:
    """The UI on its own listener (so OTLP can be exposed while the UI is not)."""

    def __init__(self, config: UiConfig, host: str, port: int) -> None:
        self.ui = Ui(config)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        self._runner = web.AppRunner(self.ui.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OSError(f"web UI on {self._host}:{self._port}: {exc.strerror or exc}") from exc
        server = site._server  # the bound socket, for port 0
        sockets = getattr(server, "sockets", None) or ()
        self.port = sockets[0].getsockname()[1] if sockets else self._port
        log.info("web UI on http://%s:%d/", self._host, self.port)
        self.ui.warm()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
