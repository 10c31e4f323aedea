"""Leaving on time: ``toolscore serve`` exits within its shutdown budget whatever the database does.

A thread blocked in a database call cannot be interrupted from Python, and the interpreter joins
such threads at exit (the ingest writer's executor, ``asyncio.to_thread``'s), so a stop that
gave up on them would still hang in the interpreter's own shutdown. When work had to be abandoned
the process therefore ends with :func:`os._exit` after logging why; and an :class:`ExitDeadline`
armed at the signal ends it even if the orderly stop itself never returns.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger("toolscore.serve")

# After the receivers' grace: time left for the writer, the components and the engine to stop.
STOP_EXTRA_S = 5.0
# After that: the orderly stop is given up and the process exits regardless.
HARD_EXIT_EXTRA_S = 2.0
EXIT_ABANDONED = 1  # exit status when database work was abandoned at shutdown


def exit_now(reason: str, status: int = EXIT_ABANDONED) -> None:
    """Log ``reason``, flush, and end the process without joining any thread."""
    log.warning("toolscore serve: %s; exiting now (status %d)", reason, status)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class ExitDeadline:
    """``arm(seconds)``: unless :meth:`disarm` is called first, exit after ``seconds``."""

    def __init__(self) -> None:
        self._disarmed = threading.Event()

    def arm(self, seconds: float) -> None:
        def wait() -> None:
            if not self._disarmed.wait(seconds):
                exit_now(f"shutdown did not finish within {seconds:g} s")

        threading.Thread(target=wait, name="toolscore-exit-deadline", daemon=True).start()

    def disarm(self) -> None:
        self._disarmed.set()
