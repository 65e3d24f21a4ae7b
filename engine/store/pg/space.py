"""How much a room's PostgreSQL database takes, and giving back what retention freed.

PostgreSQL never shrinks a table's files for a DELETE: VACUUM (autovacuum's, or the one
retention runs after it pruned) makes the space reusable, and only VACUUM FULL gives it
back to the disk, rewriting each table under an exclusive lock, so it runs only when the
operator asks (`agentdeck gc --vacuum`). So the database's size says little about its
data once rows were deleted, and `[retention] gb` is measured on the rows instead: the
live rows' bytes of each table, read whole in a small table and estimated from a sample of
about `SAMPLE_PAGES` of its pages in a large one (indexes and free space left out).
"""

from __future__ import annotations

from typing import Any

from engine.store.space import Space

# The tables a room's data grows in (the others hold a row per thread, rule or run).
TABLES = ("turns", "steps", "tool_calls", "events", "messages", "checkpoints", "decisions",
          "turn_requests", "outbox", "turn_marks", "usage", "rule_calls")  # fmt: skip
SAMPLE_PAGES = 1000  # pages of a table read to estimate its rows' size (8 MB)


async def pg_space(conn: Any) -> Space:
    """The database on `conn` (an autocommit connection of the store's pool)."""
    size = (await (await conn.execute("SELECT pg_database_size(current_database())")).fetchone())[0]
    pages = dict(await (await conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid)"
        " / current_setting('block_size')::int FROM pg_class c"
        " WHERE c.relname = ANY(%s) AND c.relkind = 'r'"
        " AND c.relnamespace = current_schema()::regnamespace", (list(TABLES),))).fetchall())  # fmt: skip
    used = 0.0
    for table in TABLES:
        found = int(pages.get(table) or 0)
        if found == 0:
            continue
        percent = min(100.0, 100.0 * SAMPLE_PAGES / found)  # of its pages, each read or not
        row = await (await conn.execute(
            f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t"
            f" TABLESAMPLE SYSTEM ({percent:.6f})")).fetchone()  # fmt: skip
        used += int(row[0]) * 100.0 / percent
    return Space(int(size), int(used), False)


async def pg_reclaim(conn: Any, full: bool) -> None:
    """VACUUM the tables retention prunes (`full`: VACUUM FULL, which gives the space back
    to the disk and holds each table while it rewrites it). `conn` is autocommit: VACUUM
    runs in no transaction."""
    for table in TABLES:
        await conn.execute(f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {table}")
