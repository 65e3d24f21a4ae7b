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

VERSION = 10  # the version of a database this agentdeck writes
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
    # issue 33, usage and budgets (as engine/store/migrations.py's 8)
    5: [
        *(
            f"ALTER TABLE steps ADD COLUMN IF NOT EXISTS {c}"
            for c in (
                "input_tokens BIGINT NOT NULL DEFAULT 0",
                "output_tokens BIGINT NOT NULL DEFAULT 0",
                "cached_tokens BIGINT NOT NULL DEFAULT 0",
                "cost DOUBLE PRECISION",
            )
        ),
        *(
            f"ALTER TABLE turns ADD COLUMN IF NOT EXISTS {c}"
            for c in (
                "cached_tokens BIGINT NOT NULL DEFAULT 0",
                "cost DOUBLE PRECISION NOT NULL DEFAULT 0",
                "unpriced BIGINT NOT NULL DEFAULT 0",
            )
        ),
        "UPDATE turns SET unpriced = input_tokens + output_tokens"
        " WHERE coalesce(model, '') NOT LIKE 'offline:%'",
        "CREATE TABLE IF NOT EXISTS usage (day TEXT NOT NULL, group_name TEXT NOT NULL,"
        " thread_id TEXT NOT NULL, model TEXT NOT NULL, steps BIGINT NOT NULL DEFAULT 0,"
        " input_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0,"
        " cached_tokens BIGINT NOT NULL DEFAULT 0, cost DOUBLE PRECISION NOT NULL DEFAULT 0,"
        " unpriced BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (day, group_name, thread_id, model))",
        "INSERT INTO usage(day, group_name, thread_id, model, steps, input_tokens,"
        " output_tokens, unpriced) SELECT to_char(to_timestamp(t.created_at) AT TIME ZONE 'UTC',"
        " 'YYYY-MM-DD'), h.group_name, t.thread_id, coalesce(t.model, ''), sum(t.rounds),"
        " sum(t.input_tokens), sum(t.output_tokens), sum(t.unpriced) FROM turns t"
        " JOIN threads h ON h.id = t.thread_id WHERE t.input_tokens + t.output_tokens > 0"
        " GROUP BY 1, 2, 3, 4",
        "CREATE TABLE IF NOT EXISTS budgets (scope TEXT PRIMARY KEY, tokens BIGINT,"
        " cost DOUBLE PRECISION, set_by TEXT NOT NULL, set_at DOUBLE PRECISION NOT NULL)",
    ],
    # issue 34, the shell's sandbox (as engine/store/migrations.py's 9)
    6: ["ALTER TABLE decisions ADD COLUMN IF NOT EXISTS sandbox TEXT"],
    # issue 35, retention (as engine/store/migrations.py's 10, with schema.sql's index)
    7: [
        "ALTER TABLE turns ADD COLUMN IF NOT EXISTS pruned_at DOUBLE PRECISION",
        "ALTER TABLE turns ADD COLUMN IF NOT EXISTS pruned_steps BIGINT",
        "CREATE INDEX IF NOT EXISTS turns_prunable ON turns(ended_at, id)"
        " WHERE status = 'done' AND pruned_at IS NULL",
    ],
    # issue 36, breakpoints (SQLite's room gets the tables from schema.sql)
    8: [
        "CREATE TABLE IF NOT EXISTS breakpoints (id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
        " tool TEXT, pattern TEXT, scope TEXT NOT NULL, thread_id TEXT, group_name TEXT,"
        " made_by TEXT NOT NULL, made_at DOUBLE PRECISION NOT NULL,"
        " reason TEXT NOT NULL DEFAULT '', removed_at DOUBLE PRECISION, removed_by TEXT)",
        "CREATE TABLE IF NOT EXISTS breakpoint_hits (call_id TEXT NOT NULL,"
        " breakpoint TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,"
        " PRIMARY KEY (call_id, breakpoint))",
    ],
    # issue 36, the decision audit (engine/store/audit.py): decisions and rules' verdicts
    # in the order they were recorded, each table paged by its own index (SQLite's room
    # gets them from schema.sql)
    9: [
        'CREATE INDEX IF NOT EXISTS decisions_time ON decisions(created_at, id COLLATE "C")',
        'CREATE INDEX IF NOT EXISTS rule_calls_time ON rule_calls(at, call_id COLLATE "C")',
    ],
    # issue 37, forks and replays (as engine/store/migrations.py's 11; the table too)
    10: [
        "ALTER TABLE steps ADD COLUMN IF NOT EXISTS conv_upto BIGINT",
        "CREATE TABLE IF NOT EXISTS forks (thread_id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
        " from_thread TEXT NOT NULL, from_turn TEXT NOT NULL, from_step BIGINT,"
        " upto BIGINT NOT NULL, edited TEXT NOT NULL DEFAULT '{}', group_name TEXT NOT NULL,"
        " made_by TEXT NOT NULL, made_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS forks_from ON forks(from_thread, from_turn)",
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
