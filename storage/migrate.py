"""Run the Alembic migrations shipped inside the package (no alembic.ini, any working dir)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from toolscore.storage.plumbing.engine import create_engine, normalize_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic ``Config`` pointing at ``storage/migrations`` for database ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # The URL travels in attributes, not the ini options, so '%' in passwords needs no escaping.
    cfg.attributes["url"] = normalize_url(url)
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring database ``url`` up to ``revision`` (default: the newest)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take database ``url`` down to ``revision`` (``"base"`` removes every table)."""
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    """The newest revision shipped with this version of toolscore."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(url: str) -> str | None:
    """The revision database ``url`` is at (``None`` when it was never migrated)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
