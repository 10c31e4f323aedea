"""docs/configuration.md lists every ``serve`` flag with its variables and default, as declared."""

from __future__ import annotations

import re
from pathlib import Path

from toolscore.collector.cli import build_parser
from toolscore.collector.serve_config import serve_options

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _serve_rows() -> dict[str, list[str]]:
    """``{--flag: [flag cell, environment cell, default cell, meaning]}`` of the serve tables
    (and the database table every command shares), backquotes removed."""
    rows: dict[str, list[str]] = {}
    section = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line
        if not line.startswith("| `--") or not ("serve" in section or "database" in section):
            continue
        cells = [c.strip().replace("`", "") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for flag in re.findall(r"--[a-z][a-z-]*", cells[0]):
            rows[flag] = cells
    return rows


def test_every_serve_flag_is_documented_with_its_variables_and_default() -> None:
    rows = _serve_rows()
    for option in serve_options():
        assert option.flag in rows, f"{option.flag} is missing from docs/configuration.md"
        _, env_cell, default_cell, _ = rows[option.flag]
        for variable in option.variables:
            assert variable in env_cell, f"{option.flag}: {variable} not in {env_cell!r}"
        assert option.default_text in default_cell, (
            f"{option.flag}: default {option.default_text!r} not in {default_cell!r}"
        )


def test_every_documented_serve_flag_exists() -> None:
    parser = build_parser(only="toolscore.collector.commands.serve")
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = {s for a in serve._actions for s in a.option_strings}
    assert set(_serve_rows()) <= flags
