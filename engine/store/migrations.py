"""How an execution.db made by an older agentdeck gains what schema.sql added since.

schema.sql describes a new room and is idempotent (`IF NOT EXISTS`), so new tables,
indexes and triggers reach an old room by themselves. A new column does not: SQLite has
no `ADD COLUMN IF NOT EXISTS`. So a room records its version in `PRAGMA user_version`,
and `script` gives the statements that bring a room of an older version up to `VERSION`,
run (in the same transaction) before schema.sql, which may then name the new columns.

To add a column: add it to its table in schema.sql (for new rooms), then add
`VERSION + 1: [ALTER TABLE ...]` to `STEPS` and raise `VERSION`.
"""

from __future__ import annotations

from engine.lifecycle.call import REVIEW_REASON

VERSION = 11  # the user_version of a room this agentdeck writes


def awaiting_from_reason() -> list[str]:
    """What each suspended call of an older room waits for, from its suspend reason (the
    review after a crash had one text of its own)."""
    review = REVIEW_REASON.replace("'", "''")
    return [f"UPDATE tool_calls SET awaiting = CASE WHEN suspend_reason = '{review}'"
            " THEN 'review' ELSE 'decision' END WHERE status = 'suspended'"]  # fmt: skip


# version -> the statements that bring a room of version - 1 to it
STEPS: dict[int, list[str]] = {
    # issue 15, rules: patterns, who made a rule, expiry, revocation; a remembered
    # decision's pattern.
    2: [
        "ALTER TABLE rules ADD COLUMN pattern TEXT",
        "ALTER TABLE rules ADD COLUMN made_by TEXT NOT NULL DEFAULT 'operator'",
        "ALTER TABLE rules ADD COLUMN expires_at REAL",
        "ALTER TABLE rules ADD COLUMN reason TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE rules ADD COLUMN revoked_at REAL",
        "ALTER TABLE rules ADD COLUMN revoked_by TEXT",
        "ALTER TABLE decisions ADD COLUMN pattern TEXT",
    ],
    # issue 15, decisions bound to what was approved: the hash of the approved arguments.
    3: ["ALTER TABLE decisions ADD COLUMN args_hash TEXT"],
    # issue 16, trigger work off the step: the marks calls give their turns and their
    # full-text queue move from triggers on tool_calls to the batch (index_batch.py). The
    # triggers kept both current up to now, so the batch starts at the last call, with the
    # calls still open (a suspended one's text is in calls_fts, or queued to be: either
    # way, its text now is what the index will hold).
    4: [
        "DROP TRIGGER IF EXISTS hist_calls_tool",
        "DROP TRIGGER IF EXISTS hist_calls_settled",
        "DROP TRIGGER IF EXISTS hist_calls_end",
        "DROP TRIGGER IF EXISTS hist_calls_fts_queue",
        "DROP TRIGGER IF EXISTS hist_calls_fts_unindex",
        "DROP TRIGGER IF EXISTS hist_calls_fts_delete",
        "CREATE TABLE IF NOT EXISTS open_calls (rowid INTEGER PRIMARY KEY,"
        " indexed INTEGER NOT NULL DEFAULT 0, args TEXT, result TEXT, error TEXT)",
        "INSERT OR IGNORE INTO open_calls(rowid, indexed, args, result, error)"
        " SELECT rowid, status = 'suspended', iif(status = 'suspended', args, NULL),"
        " iif(status = 'suspended', result, NULL), iif(status = 'suspended', error, NULL)"
        " FROM tool_calls WHERE status IN ('new', 'running', 'suspended', 'resuming')",
        "INSERT INTO counters(name, value) SELECT 'marks:calls', coalesce(max(rowid), 0)"
        " FROM tool_calls WHERE true ON CONFLICT(name) DO NOTHING",
    ],
    # issue 17, outbound delivery: the outbox (engine/store/outbox.py). A new table reaches
    # an old room through schema.sql alone; the version says the room may hold answers
    # that an older agentdeck, which would never deliver them, must not take over.
    # (the same statements as schema.sql's; a room at 4 gets them from either)
    5: [
        "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, turn_id TEXT NOT NULL,"
        " thread_id TEXT NOT NULL, channel TEXT NOT NULL, reply TEXT NOT NULL DEFAULT '{}',"
        " text TEXT NOT NULL, key TEXT NOT NULL UNIQUE, state TEXT NOT NULL DEFAULT 'pending',"
        " tries INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, last_error TEXT,"
        " created_at REAL NOT NULL, sent_at REAL)",
        "CREATE INDEX IF NOT EXISTS outbox_due ON outbox(next_at, id)"
        " WHERE state IN ('pending', 'retrying')",
        "CREATE INDEX IF NOT EXISTS outbox_thread ON outbox(thread_id, id)"
        " WHERE state IN ('pending', 'retrying')",
        "CREATE INDEX IF NOT EXISTS outbox_state ON outbox(state, id)",
    ],
    # issue 27, a typed review state: what a suspended call waits for, said by a column
    # instead of read from its suspend reason's text.
    6: ["ALTER TABLE tool_calls ADD COLUMN awaiting TEXT", *awaiting_from_reason()],
    # issue 32, instructions: what each turn was told (by hash: the instructions table,
    # from schema.sql), and a thread's own, set by an operator; the model of each turn.
    7: [
        "ALTER TABLE turns ADD COLUMN instructions TEXT",
        "ALTER TABLE turns ADD COLUMN model TEXT",
        "ALTER TABLE threads ADD COLUMN instructions TEXT",
    ],
    # issue 33, usage and budgets: tokens and cost per step and turn; the usage table
    # (from schema.sql, made here too so that it can be filled) gets what the room's turns
    # spent so far, their tokens counted unpriced (no price was known when they ran) but
    # for the offline model's, which are free.
    8: [
        *(
            f"ALTER TABLE steps ADD COLUMN {c}"
            for c in (
                "input_tokens INTEGER NOT NULL DEFAULT 0",
                "output_tokens INTEGER NOT NULL DEFAULT 0",
                "cached_tokens INTEGER NOT NULL DEFAULT 0",
                "cost REAL",
            )
        ),
        *(
            f"ALTER TABLE turns ADD COLUMN {c}"
            for c in (
                "cached_tokens INTEGER NOT NULL DEFAULT 0",
                "cost REAL NOT NULL DEFAULT 0",
                "unpriced INTEGER NOT NULL DEFAULT 0",
            )
        ),
        "UPDATE turns SET unpriced = input_tokens + output_tokens"
        " WHERE coalesce(model, '') NOT LIKE 'offline:%'",
        "CREATE TABLE IF NOT EXISTS usage (day TEXT NOT NULL, group_name TEXT NOT NULL,"
        " thread_id TEXT NOT NULL, model TEXT NOT NULL, steps INTEGER NOT NULL DEFAULT 0,"
        " input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,"
        " cached_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,"
        " unpriced INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (day, group_name, thread_id, model))"
        " WITHOUT ROWID",
        "INSERT INTO usage(day, group_name, thread_id, model, steps, input_tokens,"
        " output_tokens, unpriced) SELECT date(t.created_at, 'unixepoch'), h.group_name,"
        " t.thread_id, coalesce(t.model, ''), sum(t.rounds), sum(t.input_tokens),"
        " sum(t.output_tokens), sum(t.unpriced) FROM turns t JOIN threads h ON h.id = t.thread_id"
        " WHERE t.input_tokens + t.output_tokens > 0 GROUP BY 1, 2, 3, 4",
    ],
    # issue 34, the shell's sandbox: a decision that ran a call outside it (or with the
    # network) says so, for the audit.
    9: ["ALTER TABLE decisions ADD COLUMN sandbox TEXT"],
    # issue 35, retention: a turn whose steps and events were pruned says when, and how
    # many steps it had (schema.sql then adds the index retention reads by).
    10: [
        "ALTER TABLE turns ADD COLUMN pruned_at REAL",
        "ALTER TABLE turns ADD COLUMN pruned_steps INTEGER",
    ],
    # issue 37, forks: the thread's entries when a step ended (where a fork of it cuts);
    # schema.sql then adds the forks table.
    11: ["ALTER TABLE steps ADD COLUMN conv_upto INTEGER"],
}


class TooNew(ValueError):
    """The room was written by a newer agentdeck, whose columns this one does not know."""


def script(version: int) -> str:
    """The statements that bring a room at `version` to `VERSION` (none for a new room,
    version 0: schema.sql makes it whole), and the new version."""
    if version > VERSION:
        raise TooNew(
            f"execution.db is at version {version}; this agentdeck knows up to {VERSION}: "
            "upgrade agentdeck"
        )
    steps = [] if version == 0 else [s for v in range(version + 1, VERSION + 1) for s in STEPS[v]]
    return "".join(f"{statement};\n" for statement in steps)
