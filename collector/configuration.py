"""The one configuration mechanism: command-line flag, else environment variable, else default.

Every setting is declared once as an :class:`Option` (its flag, its variable, its parser, its
default and its help). The declarations build the argparse flags (:func:`add_options`, which
appends ``(env VAR; default D)`` to the help) and resolve them (:func:`resolve`); a bad value
raises :class:`ConfigError`, the one configuration error type, naming the flag and the
variable: ``--settle / TOOLSCORE_SETTLE: expected a number of seconds, got 'x'``. The CLI turns
it into exit status 2 (``collector/cli.py``). Nothing here reads ``os.environ``: callers pass
the environment in, once, at start-up.

Adding a ``serve`` flag (docs/architecture.md, "Configuration"):

1. add a field to the frozen dataclass of the part it configures (``Settings`` in
   ``collector/settings.py``, ``PipelineOptions`` in ``collector/pipeline/options.py``, the
   write-back's ``OPTIONS`` in ``collector/export/settings.py``, ``RetentionOptions`` in
   ``collector/upkeep/retention_runner.py``; every part is listed in ``collector/serve_config.py``);
2. add an ``Option(flag, field, help, parse=..., default=...)`` to that module's ``OPTIONS``
   tuple (the variable defaults to ``TOOLSCORE_`` + the flag's name; the parsers below raise
   ``ValueError("expected ...")`` and the mechanism adds the names and the bad value);
3. add its row to docs/configuration.md (``tests/collector/test_configuration_docs.py`` fails
   until the row names the flag, the variable and the default) and to the precedence table of
   ``tests/collector/test_configuration.py``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolscore.collector.errors import UsageError

Parser = Callable[[str], Any]


class ConfigError(UsageError, ValueError):
    """A flag, an environment variable or a combination of them has an invalid value."""


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: ``--flag`` beats its variable(s), which beat ``default``.

    ``kind``: ``value`` (``--flag VALUE``), ``switch`` (``--flag`` alone: the field becomes
    ``flag_value``; the variable is read as a boolean, true meaning "as if the flag were given",
    or, with ``env_is_field``, the field's own value) or ``list`` (repeatable flag; the variable
    holds comma-separated items; ``parse`` reads one item, the field gets a tuple).
    """

    flag: str
    field: str
    help: str
    parse: Parser = str
    default: Any = None
    env: str | None = ""  # "": TOOLSCORE_ + the flag's name; None: no variable
    more_env: tuple[tuple[str, Parser], ...] = ()  # read after ``env`` (OTEL_EXPORTER_OTLP_*)
    metavar: str | None = None
    kind: Literal["value", "switch", "list"] = "value"
    flag_value: Any = True
    env_is_field: bool = False
    shown_default: str | None = None  # the default as help and docs show it
    secret: bool = False  # errors never quote the value

    @property
    def variable(self) -> str | None:
        if self.env == "":
            return "TOOLSCORE_" + self.flag.removeprefix("--").upper().replace("-", "_")
        return self.env

    @property
    def variables(self) -> tuple[str, ...]:
        first = (self.variable,) if self.variable else ()
        return first + tuple(name for name, _ in self.more_env)

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return "none" if self.default is None else str(self.default)

    def names(self, variable: str | None = None) -> str:
        """``--flag / VARIABLE`` (the variable the value came from, else the first one)."""
        variable = variable or self.variable or (self.variables or (None,))[0]
        return f"{self.flag} / {variable}" if variable else self.flag

    def read(self, text: str) -> Any:
        """``text`` given for the flag (by code, not argparse), parsed and checked."""
        return _parse(self, self.parse, text, None)

    def error(
        self, message: str, text: str | None = None, variable: str | None = None
    ) -> ConfigError:
        got = "" if text is None or self.secret else f", got {text!r}"
        return ConfigError(f"{self.names(variable)}: {message}{got}")


def add_options(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """The options' flags; every default is None so that a given flag can be told apart."""
    for option in options:
        env = " / ".join(option.variables)
        help_text = f"{option.help} (env {env}; default {option.default_text})".replace("%", "%%")
        if option.kind == "switch":
            parser.add_argument(
                option.flag,
                dest=option.dest,
                action="store_const",
                const=True,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                option.flag,
                dest=option.dest,
                metavar=option.metavar,
                action="append" if option.kind == "list" else "store",
                default=None,
                help=help_text,
            )


def resolve(
    options: Iterable[Option], args: argparse.Namespace | None, environ: Mapping[str, str]
) -> dict[str, Any]:
    """``{field: value}`` for every option; raises :class:`ConfigError`."""
    return {option.field: resolve_one(option, args, environ) for option in options}


def resolve_one(option: Option, args: argparse.Namespace | None, environ: Mapping[str, str]) -> Any:
    given = getattr(args, option.dest, None) if args is not None else None
    if option.kind == "switch":
        if given:
            return option.flag_value
        variable, text = _from_environment(option.variable, environ)
        if text is None or variable is None:
            return option.default
        on = _parse(option, boolean, text, variable)
        if option.env_is_field:
            return on
        return option.flag_value if on else option.default
    if given is not None:
        if option.kind == "list":
            return tuple(_parse(option, option.parse, str(item), None) for item in given)
        return _parse(option, option.parse, str(given), None)
    chain = [(option.variable, option.parse)] if option.variable else []
    for variable, parse in [*chain, *option.more_env]:
        name, text = _from_environment(variable, environ)
        if text is None or name is None:
            continue
        if option.kind == "list":
            items = [item.strip() for item in text.split(",") if item.strip()]
            return tuple(_parse(option, parse, item, name) for item in items)
        return _parse(option, parse, text, name)
    return option.default


def _from_environment(
    variable: str | None, environ: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """An empty or blank variable counts as unset."""
    if variable is None:
        return None, None
    text = environ.get(variable, "").strip()
    return variable, (text or None)


def _parse(option: Option, parse: Parser, text: str, variable: str | None) -> Any:
    try:
        return parse(text.strip())
    except ConfigError:
        raise
    except ValueError as exc:
        raise option.error(str(exc), text, variable) from None


# Parsers: text -> value, or ValueError("expected ...") without the value (the caller adds it).

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise ValueError("expected true or false (1/0, yes/no, on/off)")


def seconds(text: str) -> float:
    """A number of seconds, 0 or more."""
    value = _float(text, "expected a number of seconds")
    if not value >= 0:
        raise ValueError("expected a number of seconds, 0 or more")
    return value


def positive_seconds(text: str) -> float:
    value = _float(text, "expected a number of seconds")
    if not value > 0:
        raise ValueError("expected a number of seconds greater than 0")
    return value


def positive_int(text: str) -> int:
    return _whole(text, 1, "expected a whole number greater than 0")


def whole_number(text: str) -> int:
    """A whole number, 0 or more."""
    return _whole(text, 0, "expected a whole number, 0 or more")


def _whole(text: str, least: int, message: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise ValueError(message) from None
    if value < least:
        raise ValueError(message)
    return value


def choice(*values: str) -> Parser:
    def parse(text: str) -> str:
        lowered = text.strip().lower()
        if lowered not in values:
            raise ValueError("expected " + " or ".join(values))
        return lowered

    return parse


def one_word(text: str) -> str:
    if not text.isprintable() or " " in text:
        raise ValueError("expected one word (no spaces or control characters)")
    return text


def metric_level(text: str) -> tuple[str, float]:
    """``METRIC=VALUE`` with VALUE in [0, 1] (``--pass-threshold``, ``--fail-under``)."""
    name, sep, value = text.partition("=")
    number = _float(value, "", default=math.nan) if sep else math.nan
    if not sep or not name.strip() or not 0.0 <= number <= 1.0:
        raise ValueError("expected METRIC=VALUE with VALUE in [0, 1]")
    return name.strip(), number


def metric_levels(
    items: Sequence[str], flag: str, known: Iterable[str] | None = None
) -> dict[str, float]:
    """``METRIC=VALUE`` items as a mapping; with ``known``, METRIC must be one of them."""
    names = None if known is None else list(known)
    option = Option(flag, "levels", "", parse=metric_level, env=None)
    out: dict[str, float] = {}
    for item in items:
        name, level = _parse(option, metric_level, item, None)
        if names is not None and name not in names:
            raise option.error(f"no metric instance {name!r} ({', '.join(names)})", item)
        out[name] = level
    return out


def _float(text: str, message: str, default: float | None = None) -> float:
    try:
        return float(text)
    except ValueError:
        if default is not None:
            return default
        raise ValueError(message) from None
