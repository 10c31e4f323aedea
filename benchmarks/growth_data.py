"""Growing a toolscore database quickly for ``bench_growth.py``: a scored conversation's rows in
every table copied with new ids and older arrival times (raw ``executemany`` on SQLite, ``COPY``
on PostgreSQL), and the fresh databases each measurement is compared with."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from pipeline_load import SPANS_PER_TRACE
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table
from toolscore.storage.telemetry.traces import traces_table

TABLES = (traces_table, spans_table, conversations, evaluations, tool_calls)
SEQ_COLUMNS = frozenset({"seq", "trace_seq"})  # the trace's number: the next ones, in order
CHUNK = 2_000  # conversations per growth transaction
DAY_NS = 86_400 * 10**9

# Arrival times are moved back (what retention and readiness read); the spans' own start and
# end times stay (PostgreSQL partitions spans by start time: they land in today's partition).
NS_COLUMNS = frozenset({"received_at_ns", "last_span_received_ns"})


def raw_rows(conn: Any, table: Any, where: str) -> tuple[list[str], list[list[Any]]]:
    columns = [c.name for c in table.columns]
    if table.name in ("evaluations", "tool_calls"):  # their ids are the database's to give
        columns.remove("id")
    names = ", ".join(columns)
    query = f"SELECT {names} FROM {table.name} WHERE {where}"
    if conn.dialect.name != "postgresql":
        return columns, [list(r) for r in conn.exec_driver_sql(query)]
    raw = conn.connection.dbapi_connection
    lines: list[list[Any]] = []
    with raw.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT") as copy:
        text_out = b"".join(bytes(block) for block in copy).decode()
    lines = [line.split("\t") for line in text_out.splitlines()]
    return columns, lines


def _clone(
    template: dict[str, Any], n: int, age_ns: int, first_seq: int
) -> dict[str, list[list[Any]]]:
    """Rows of ``n`` new conversations like the template (new ids, trace numbers from
    ``first_seq`` on), ``age_ns`` older."""
    conv, trace = template["_ids"][0]
    span_ids = [r[template["spans"][0].index("span_id")] for r in template["spans"][1]]
    out: dict[str, list[list[Any]]] = {t.name: [] for t in TABLES}
    for i in range(n):
        new = {trace: uuid.uuid4().hex, **{s: uuid.uuid4().hex[:16] for s in span_ids}}
        new_conv = f"g-{uuid.uuid4().hex[:16]}"
        for table in TABLES:
            columns, rows = template[table.name]
            for row in rows:
                out[table.name].append(
                    [
                        type(v)(first_seq + i)
                        if c in SEQ_COLUMNS
                        else _fix(c, v, new, conv, new_conv, age_ns)
                        for c, v in zip(columns, row, strict=True)
                    ]
                )
    return out


def _fix(column: str, value: Any, new: dict[str, str], conv: str, new_conv: str, age: int) -> Any:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        return value
    if column in NS_COLUMNS and value not in (None, "\\N"):
        return type(value)(int(value) - age)
    if isinstance(value, str):
        if value in new:
            return new[value]
        if conv in value:  # the conversation id, alone or inside attribute JSON
            return value.replace(conv, new_conv)
    return value


def _insert(conn: Any, table: Any, columns: list[str], rows: list[list[Any]]) -> None:
    raw = conn.connection.dbapi_connection
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        data = "".join("\t".join(row) + "\n" for row in rows)
        with raw.cursor() as cur, cur.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy:
            copy.write(data)
        return
    marks = ", ".join("?" for _ in columns)
    raw.executemany(f"INSERT INTO {table.name} ({names}) VALUES ({marks})", rows)


def grow(url: str, template: dict[str, Any], target_spans: int) -> float:
    """Add cloned conversations until ``url`` holds ``target_spans`` spans; seconds taken."""
    engine = create_engine(url)
    started = time.monotonic()
    with engine.connect() as conn:
        have = int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
        seq = int(conn.execute(select(func.coalesce(func.max(traces_table.c.seq), 0))).scalar_one())
    missing = max(0, target_spans - have) // SPANS_PER_TRACE
    done = 0
    while done < missing:
        n = min(CHUNK, missing - done)
        age = DAY_NS * (1 + 30 * (missing - done) // max(1, missing))  # older first, 1-31 days
        batch = _clone(template, n, age, seq + 1)
        seq += n
        with engine.begin() as conn:
            for table in TABLES:
                _insert(conn, table, template[table.name][0], batch[table.name])
        done += n
        if done % (CHUNK * 100) == 0:
            print(f"    grown {done * SPANS_PER_TRACE:,} spans", flush=True)
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            # numbers given here, not by the sequence: live traffic's come after them
            conn.execute(
                text("SELECT setval(pg_get_serial_sequence('traces', 'seq'), :n)"), {"n": seq}
            )
            conn.execute(text("VACUUM ANALYZE"))  # as autovacuum would have by then
    engine.dispose()
    return time.monotonic() - started


class Databases:
    """Fresh databases of one kind: SQLite files in a directory, or PostgreSQL databases."""

    def __init__(self, kind: str, admin_url: str | None, workdir: Path) -> None:
        self.kind, self.admin_url, self.workdir = kind, admin_url, workdir
        self.made: list[str] = []

    def new(self, name: str) -> str:
        if self.kind == "sqlite":
            path = self.workdir / f"{name}-{uuid.uuid4().hex[:6]}.db"
            self.made.append(str(path))
            return f"sqlite:///{path}"
        assert self.admin_url is not None
        db = f"growth_{name}_{uuid.uuid4().hex[:6]}"
        admin = create_engine(self.admin_url)
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'CREATE DATABASE "{db}"'))
        admin.dispose()
        self.made.append(db)
        return self._url(db)

    def drop(self, url: str) -> None:
        """Drop one database made by ``new`` (given its URL)."""
        if self.kind == "sqlite":
            made = url.removeprefix("sqlite:///")
            for suffix in ("", "-wal", "-shm"):
                Path(made + suffix).unlink(missing_ok=True)
        else:
            made = make_url(url).database or ""
            admin = create_engine(self.admin_url or "")
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{made}" WITH (FORCE)'))
            admin.dispose()
        self.made.remove(made)

    def drop_all(self) -> None:
        for made in list(self.made):
            self.drop(f"sqlite:///{made}" if self.kind == "sqlite" else self._url(made))

    def _url(self, db: str) -> str:
        return make_url(self.admin_url or "").set(database=db).render_as_string(hide_password=False)
