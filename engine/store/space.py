"""How much disk a room's execution.db takes, and giving back what retention freed.

SQLite reuses the pages a DELETE frees before it grows the file, but gives them back to
the disk only by a vacuum. A room made since issue 35 has `auto_vacuum = INCREMENTAL`
(engine/store/sqlite.py sets it on a new file), so its free pages go back a chunk at a
time (`PRAGMA incremental_vacuum`), each chunk a short write transaction. An older room's
`auto_vacuum` is NONE, which only a whole VACUUM changes: that rewrites the file, holding
the room's writes for as long as it takes, so it runs only when the operator asks
(`agentdeck gc --vacuum`), and leaves the room incremental from then on.

Both run on a connection of their own while holding the writer's lock (the writer takes it
for each batch, engine/store/writer.py), so the writer waits between two of its batches
and never meets a busy database. In WAL mode the file shrinks when the WAL is copied back,
so each ends with a TRUNCATE checkpoint.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1024  # pages one incremental vacuum gives back (4 MiB at the default page size)
INCREMENTAL = 2  # PRAGMA auto_vacuum's value
SPACE = ("page_count", "freelist_count", "page_size", "auto_vacuum")  # what `Space` reads


@dataclass(frozen=True)
class Space:
    """A store's size: `file_bytes` on disk (the database's files, or a PostgreSQL
    database's size), `used_bytes` what its data takes (what `[retention] gb` limits:
    without the free pages a delete left), and whether freed space goes back to the disk
    by itself (`returns`: SQLite's incremental auto-vacuum; else only a vacuum)."""

    file_bytes: int
    used_bytes: int
    returns: bool


def files_of(path: Path) -> int:
    """The bytes of a SQLite database's files (the database and its WAL)."""
    total = 0
    for name in (path, path.with_name(path.name + "-wal")):
        try:
            total += name.stat().st_size
        except FileNotFoundError:
            pass
    return total


def sqlite_reclaim(path: Path, lock: threading.Lock, full: bool) -> None:
    """Give the free pages of `path` back to the disk: chunk by chunk when the room is
    incremental, or (`full`) by a VACUUM that also makes it so (blocking)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        if full:
            with lock:
                conn.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
                conn.execute("VACUUM")
        elif int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL:
            left = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            while left > 0:
                with lock:  # (executescript steps the pragma to its end: execute frees a page)
                    conn.executescript(f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({CHUNK});"
                                       " COMMIT;")  # fmt: skip
                now = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
                if now >= left:
                    break
                left = now
        with lock:  # the WAL copied back: the file takes its new size
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
