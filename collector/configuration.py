"""The one configuration mechanism: flag, else environment variable, else file, else default.

Every setting is declared once as an :class:`Option` (its flag, its variable, its parser, its
default and its help). The declarations build the argparse flags (:func:`add_options`, which
appends ``(env VAR; default D)`` to the help) and resolve them (:func:`resolve`); a bad value
raises :class:`ConfigError`, the one configuration error type, naming the flag and where the
value came from: ``--settle / TOOLSCORE_SETTLE: expected a number of seconds, got 'x'``, or
``--settle / serve.settle in deploy.yaml: ...`` for a section of a configuration file
(:func:`read_section`: its keys are the flag names, its values read as the flags' text). The
CLI turns it into exit status 2 (``collector/cli.py``). Nothing here reads ``os.environ``:
callers pass the environment in, once, at start-up.

Adding a ``serve`` flag, step by step: docs/architecture.md, "Configuration: adding a flag".
"""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from toolscore.collector.errors import UsageError

if TYPE_CHECKING:
    import yaml

Parser = Callable[[str], Any]
FileValue = str | tuple[str, ...]  # a scalar's text, or a list's items (list options only)


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
    options: Iterable[Option],
    args: argparse.Namespace | None,
    environ: Mapping[str, str],
    file: FileSection | None = None,
) -> dict[str, Any]:
    """``{field: value}`` for every option; raises :class:`ConfigError`."""
    return {option.field: resolve_one(option, args, environ, file) for option in options}


def resolve_one(
    option: Option,
    args: argparse.Namespace | None,
    environ: Mapping[str, str],
    file: FileSection | None = None,
) -> Any:
    """The flag, else toolscore's variable, else ``file``, else the ``more_env`` variables
    (the standard ``OTEL_*`` ones, read by every OpenTelemetry program), else the default."""
    given = getattr(args, option.dest, None) if args is not None else None
    if option.kind == "switch":
        return _switch(option, given, environ, file)
    if given is not None:
        if option.kind == "list":
            return tuple(_parse(option, option.parse, str(item), None) for item in given)
        return _parse(option, option.parse, str(given), None)
    chain = [(option.variable, option.parse)] if option.variable else []
    for variable, parse in chain:
        name, text = _from_environment(variable, environ)
        if text is not None and name is not None:
            return _parse_text(option, parse, text, name)
    if file is not None and (found := file.get(option)) is not None:
        source, value = found
        if isinstance(value, tuple):
            return tuple(_parse(option, option.parse, item, source) for item in value)
        return _parse_text(option, option.parse, value, source)
    for variable, parse in option.more_env:
        name, text = _from_environment(variable, environ)
        if text is not None and name is not None:
            return _parse_text(option, parse, text, name)
    return option.default


def _switch(
    option: Option, given: Any, environ: Mapping[str, str], file: FileSection | None
) -> Any:
    """In the file a switch's key is its flag: true means as if the flag were given."""
    if given:
        return option.flag_value
    variable, text = _from_environment(option.variable, environ)
    if text is not None and variable is not None:
        on = _parse(option, boolean, text, variable)
        if option.env_is_field:
            return on
        return option.flag_value if on else option.default
    found = file.get(option) if file is not None else None
    if found is None:
        return option.default
    source, value = found
    on = _parse(option, boolean, str(value), source)
    return option.flag_value if on else option.default


def _parse_text(option: Option, parse: Parser, text: str, source: str) -> Any:
    """A variable's or file's text: a list option's items are comma-separated."""
    if option.kind == "list":
        items = [item.strip() for item in text.split(",") if item.strip()]
        return tuple(_parse(option, parse, item, source) for item in items)
    return _parse(option, parse, text, source)


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


@dataclass(frozen=True, slots=True)
class FileSection:
    """What a configuration file's section sets: option ``dest`` -> (key as written, value).
    Values are the file's text, untyped (``off`` and ``1:30`` reach the option's parser as
    written, like a flag's value); an empty value counts as unset."""

    path: Path
    section: str
    values: Mapping[str, tuple[str, FileValue]]

    def get(self, option: Option) -> tuple[str, FileValue] | None:
        """(where the value came from, the value), or None when the file does not set it."""
        found = self.values.get(option.dest)
        if found is None:
            return None
        key, value = found
        return f"{self.section}.{key} in {self.path}", value


def read_section(path: Path, section: str, options: Iterable[Option]) -> FileSection:
    """The ``section`` mapping of a YAML (or JSON) file, its keys checked against ``options``'
    flag names (dashes or underscores); raises :class:`ConfigError` naming the key and the file."""
    import yaml

    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    node = _child(root, section)
    if node is None:
        return FileSection(path, section, {})
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{section} in {path}: expected a mapping of option names to values")
    known = {option.dest: option for option in options}
    values: dict[str, tuple[str, FileValue]] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        dest = key.replace("-", "_")
        where = f"{section}.{key} in {path}"
        option = known.get(dest)
        if option is None or not isinstance(key_node, yaml.ScalarNode):
            raise ConfigError(f"{where}: unknown key{_suggestion(dest, known)}")
        if dest in values:
            raise ConfigError(f"{where}: given twice")
        value = _file_value(option, value_node, where)
        if value is not None:
            values[dest] = (key, value)
    return FileSection(path, section, values)


def _child(root: yaml.Node | None, key: str) -> yaml.Node | None:
    """``key``'s value node; None if absent, null, or the file is no mapping (the scoring
    configuration's reader reports that)."""
    import yaml

    if isinstance(root, yaml.MappingNode):
        for key_node, value_node in root.value:
            if key_node.value == key and not _is_null(value_node):
                return value_node  # type: ignore[no-any-return]
    return None


def _is_null(node: yaml.Node) -> bool:
    return node.tag == "tag:yaml.org,2002:null"


def _file_value(option: Option, node: yaml.Node, where: str) -> FileValue | None:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return None if _is_null(node) else str(node.value)
    if isinstance(node, yaml.SequenceNode) and option.kind == "list":
        items = node.value
        if all(isinstance(item, yaml.ScalarNode) and not _is_null(item) for item in items):
            return tuple(str(item.value) for item in items)
        raise option.error("expected a list of values", variable=where)
    kind = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
    expected = "a value or a list of values" if option.kind == "list" else "one value"
    raise option.error(f"expected {expected}, got {kind}", variable=where)


def _suggestion(dest: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(dest, known, n=1)
    hint = f": did you mean {close[0].replace('_', '-')}?" if close else ""
    return f"{hint} (the keys are the flags of toolscore serve, without --)"


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
