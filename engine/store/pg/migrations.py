"""Versions of a room's PostgreSQL schema, applied at start by one worker at a time.

A database records its version in `agentdeck_schema`. `migrate` runs in one transaction
that first takes a transaction-scoped advisory lock (`pg_advisory_xact_lock`): workers
starting together on a fresh database queue on the lock, the first creates the schema,
the others find it at `VERSION` and apply nothing. A failed migration rolls back whole.

To change the schema: edit pg/schema.sql (for new databases), then add
`VERSION + 1: [ALTER TABLE ...]` to `STEPS` and raise `VERSION`.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from engine.store.migrations import awaiting_from_reason

VERSION = 4  # the version of a database this agentdeck writes
LOCK_KEY = 0x61676E7464636B  # "agntdck": the advisory lock held while migrating

# version -> the statements that bring a database of version - 1 to it
STEPS: dict[int, list[str]] = {
    # issue 27, a typed review state (as engine/store/migrations.py's 6)
    2: ["ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS awaiting TEXT", *awaiting_from_reason()],
    # issue 28, a cancel is a record (SQLite's room gets the table from schema.sql)
    3: [
        "CREATE TABLE IF NOT EXISTS cancels (turn_id TEXT PRIMARY KEY, reason TEXT NOT NULL,"
        " asked_at DOUBLE PRECISION NOT NULL)"
    ],
    # issue 32, instructions (as engine/store/migrations.py's 7; an upgraded database
    # never runs schema.sql, so the table is made here too)
    4: [
        "CREATE TABLE IF NOT EXISTS instructions (hash TEXT PRIMARY KEY, text TEXT NOT NULL,"
        " parts TEXT NOT NULL DEFAULT '[]', created_at DOUBLE PRECISION NOT NULL)",
        "ALTER TABLE turns ADD COLUMN IF NOT EXISTS instructions TEXT",
        "ALTER TABLE turns ADD COLUMN IF NOT EXISTS model TEXT",
        "ALTER TABLE threads ADD COLUMN IF NOT EXISTS instructions TEXT",
    ],
}


class TooNew(ValueError):
    """The database was written by a newer agentdeck, whose columns this one does not know."""


def schema() -> str:
    return resources.files("engine.store.pg").joinpath("schema.sql").read_text()


def migrate(conn: Any) -> int:
    """Bring the database of `conn` (a psycopg Connection, not in a transaction) to
    `VERSION`, in one transaction under the advisory lock; the number of steps applied
    (0: it was current)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS agentdeck_schema (version BIGINT NOT NULL,"
                     " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")  # fmt: skip
        row = conn.execute("SELECT max(version) FROM agentdeck_schema").fetchone()
        version = int(row[0] or 0)
        if version > VERSION:
            raise TooNew(f"the database is at version {version}; this agentdeck knows up to "
                         f"{VERSION}: upgrade agentdeck")  # fmt: skip
        if version == VERSION:
            return 0
        if version == 0:
            conn.execute(schema())
        else:
            for v in range(version + 1, VERSION + 1):
                for statement in STEPS[v]:
                    conn.execute(statement)
        conn.execute("INSERT INTO agentdeck_schema(version) VALUES (%s)", (VERSION,))
        return VERSION - version
