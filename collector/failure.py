"""Errors a command ends with, and their exit statuses (docs/cli.md, "Exit status").

Commands and the code they call raise these; ``collector/cli.py`` is the one place that prints
them (``toolscore COMMAND: message`` on stderr) and turns them into the exit status.
"""

from __future__ import annotations


class Failure(Exception):
    """The command could not do its work (a database, a file, the network): exit status 1."""

    status = 1


class UsageError(Failure):
    """The command was asked something it cannot do (a bad flag, variable or file): status 2."""

    status = 2
