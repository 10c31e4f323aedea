"""The ``toolscore`` command line.

Each sub-command lives in its own module under :mod:`toolscore.collector.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``handler`` (a callable taking the parsed
``argparse.Namespace`` and returning an exit status). Command modules import their heavy
dependencies (grpc, sqlalchemy, ...) inside the handler so that ``toolscore score`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

# Order is the order shown in ``toolscore --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "toolscore.collector.commands.score",
    "toolscore.collector.commands.evaluate",
    "toolscore.collector.commands.serve",
    "toolscore.collector.commands.db",
    "toolscore.collector.commands.refs",
    "toolscore.collector.commands.conversations",
    "toolscore.collector.commands.report",
    "toolscore.collector.commands.export",
    "toolscore.collector.commands.rescore",
    "toolscore.collector.commands.prune",
    "toolscore.collector.commands.ui",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with ``only`` (a module of COMMAND_MODULES) just that command's.

    Building one command's parser spares ``toolscore score`` the import cost of the others.
    """
    parser = argparse.ArgumentParser(
        prog="toolscore",
        description="Score how well AI agents use their tools, from their OpenTelemetry traces.",
    )
    parser.add_argument("--version", action="version", version=f"toolscore {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES if only is None else (only,):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # command not written yet; its absence is not an error
                continue
            raise
        module.register(subparsers)
    return parser


def _version() -> str:
    import toolscore

    return toolscore.__version__


def _module_named_like(argv: Sequence[str]) -> str | None:
    """The command module whose last name equals the first argument (``score`` → its module)."""
    if not argv:
        return None
    for module_name in COMMAND_MODULES:
        if module_name.rsplit(".", 1)[-1] == argv[0]:
            return module_name
    return None


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_module_named_like(argv))
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    return run(args.handler, args, _command_name(args, argv))


def run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace, name: str) -> int:
    """The one place that turns how a command ended into its exit status (docs/cli.md):
    its return value; a :class:`Failure` (1) or :class:`UsageError` (2, a ``ConfigError``
    among them) printed as ``toolscore COMMAND: message``; 130 on Ctrl-C; quietly 0 (or the
    command's ``closed_stdout_status``) when stdout's reader went away."""
    from toolscore.collector.errors import Failure

    try:
        status: int = handler(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _reader_went_away()
        # 0: the reader has all it wanted; a command whose cut output loses results says 1
        return int(getattr(args, "closed_stdout_status", 0))
    except Failure as exc:
        from toolscore.collector.views.safe_text import safe_message

        print(safe_message(f"toolscore {name}: {exc}"), file=sys.stderr)
        return exc.status
    return status


def _command_name(args: argparse.Namespace, argv: Sequence[str]) -> str:
    """The sub-command for messages: ``serve``, ``refs import`` (an action is the value of
    a ``*_command`` destination, as ``refs`` and ``db`` name theirs)."""
    words = [argv[0]] if argv and not argv[0].startswith("-") else []
    words += [str(v) for k, v in vars(args).items() if k.endswith("_command") and v]
    return " ".join(words) or "toolscore"


def _reader_went_away() -> None:
    """stdout's reader closed the pipe (``toolscore refs list | head -1``): not an error of
    ours, so no traceback; stdout is pointed at /dev/null so that the interpreter's final
    flush does not fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
