"""toolscore storage: SQLAlchemy models, migrations and repositories."""
