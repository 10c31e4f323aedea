"""``toolscore ui``: the web UI over a database, without receiving traffic."""

from __future__ import annotations

import argparse
import os
from typing import Any

from toolscore.collector.configuration import add_options, resolve_one
from toolscore.collector.settings import AUTH_TOKEN, DB


def register(subparsers: Any) -> None:
    from toolscore.collector.ui.options import BROWSE_UI

    parser = subparsers.add_parser(
        "ui",
        help="browse a database's conversations and scores in a web browser",
        description="Serve the web UI over a database (read-mostly: re-score and promote "
        "write). Stop with Ctrl-C.",
    )
    add_options(parser, (DB, BROWSE_UI, AUTH_TOKEN))
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from toolscore.collector.ui.options import BROWSE_UI
    from toolscore.collector.ui.server import UiConfig, UiServer
    from toolscore.storage.database import open_database

    url = resolve_one(DB, args, os.environ)
    listen = resolve_one(BROWSE_UI, args, os.environ)
    token = resolve_one(AUTH_TOKEN, args, os.environ)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    engine = open_database(url, must_exist=True, table="conversations")

    async def run() -> None:
        server = UiServer(UiConfig(engine, token), listen.host, listen.port)
        await server.start()
        print(f"toolscore ui: http://{listen.host}:{server.port}/ (Ctrl-C to stop)", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        engine.dispose()
    return 0
