"""A small room made by the real Runtime for the history tests, and ground truth from SQL.

Turns (ids are deterministic: t<n>, c<n>, ...):
- chat-a: `add` succeeds; then `shell` is suspended and cancelled by bob (denied)
- task-1 (task group): `boom` raises (a failed call)
- chat-b: `shell` approved by alice with edited arguments
- chore-x (chore group): `shell` left waiting for a decision
- chat-c: `shell` suspended, then the turn is cancelled
- chat-q: a message full of quotes and operators
- bulk: BULK plain turns (`add`), for paging

`seed(room, url=...)` keeps the room's store on PostgreSQL (its agentdeck.toml names the
database); `truth` then reads it there.
"""

from __future__ import annotations

import itertools
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest

from engine.config import Config, StoreConfig
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from tests.helpers import pg_spelling
from tests.scripted import Reply, ScriptedModel, add, boom, echo_results, shell

BULK = 23
QUOTED = 'what does "quoted" AND (weird) -stuff* NEAR col:val mean? zebrafish'


BACKENDS = ["sqlite", "postgresql"]


def database_for(request: pytest.FixtureRequest) -> str | None:
    """A new PostgreSQL database's URL when the test's backend is PostgreSQL, else None."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_cluster").database()


def script(request: ModelRequest) -> Reply:
    """`add ...`, `boom ...`, `shell <command>` call that tool; anything else is echoed."""
    last = request.messages[-1]
    if last.role != "user":
        return echo_results(request)
    word, _, rest = last.text.partition(" ")
    if word == "add":
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 3})])
    if word == "boom":
        return Reply(text="trying", calls=[("boom", {})])
    if word == "shell":
        return Reply(text="asking", calls=[("shell", {"command": rest})])
    return Reply(text=f"you said: {last.text}")


def msg(thread: str, text: str, origin: str = "chat") -> Message:
    if origin == "chat":
        return Message(origin="chat", channel="console", sender="op", thread_id=thread, text=text)
    sender = "self" if origin in ("task", "chore", "will") else "cli"
    return Message(origin=origin, sender=sender, thread_id=thread, text=text)  # type: ignore[arg-type]


def fake_clock(start: float = 1_700_000_000.0, step: float = 0.01) -> Any:
    ticks = itertools.count()
    return lambda: start + next(ticks) * step


def on_store(room: Path, url: str | None) -> Config:
    """The config of a room whose store is PostgreSQL at `url` (written to its
    agentdeck.toml, so that readers find it too), or SQLite (None)."""
    if url is None:
        return Config()
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(f'[store]\nurl = "{url}"\n')
    return Config(store=StoreConfig(url=url))


async def seed(room: Path, bulk: int = BULK, url: str | None = None) -> dict[str, str]:
    """Fill `room` (its store on PostgreSQL at `url` if given); return the interesting
    turn ids by name (decisions are d1, d2)."""
    counter = itertools.count(1)
    ids: dict[str, str] = {}
    async with Runtime.open(
        room, kind="test", provider=ScriptedModel(script), tools=[add, shell, boom],
        config=on_store(room, url), clock=fake_clock(), ids=lambda p: f"{p}{next(counter)}",
    ) as rt:  # fmt: skip
        ids["added"] = (await rt.run_turn(msg("chat-a", "add two and three"))).turn_id
        ids["failed"] = (await rt.run_turn(msg("task-1", "boom now", "task"))).turn_id
        out = await rt.run_turn(msg("chat-a", "shell rm -rf /"))
        ids["denied"] = out.turn_id
        await rt.decide(Decision.cancel(out.pending[0]["call_id"], "not on prod",
                                        decided_by="bob", id="d1"))  # fmt: skip
        await rt.wait_turn(out.turn_id)
        out = await rt.run_turn(msg("chat-b", "shell ls"))
        ids["approved"] = out.turn_id
        await rt.decide(Decision.approve(out.pending[0]["call_id"], args={"command": "ls -la"},
                                         decided_by="alice", id="d2"))  # fmt: skip
        await rt.wait_turn(out.turn_id)
        ids["waiting"] = (await rt.run_turn(msg("chore-x", "shell reboot", "chore"))).turn_id
        out = await rt.run_turn(msg("chat-c", "shell shutdown"))
        ids["cancelled"] = out.turn_id
        await rt.cancel_turn(out.turn_id, "changed my mind")
        await rt.wait_turn(out.turn_id)
        ids["quoted"] = (await rt.run_turn(msg("chat-q", QUOTED))).turn_id
        for i in range(bulk):
            await rt.run_turn(msg("bulk", f"add bulk number {i}", "invoke"))
    return ids


def store_url_of(db: Path) -> str | None:
    """The PostgreSQL URL in the agentdeck.toml beside `db` (None: the store is `db`)."""
    config = db.parent / "agentdeck.toml"
    if not config.exists():
        return None
    return tomllib.loads(config.read_text()).get("store", {}).get("url")


def truth(db: Path, sql: str, *params: Any) -> list[tuple]:
    """Ground truth straight from the room's database, execution.db or the PostgreSQL one
    its agentdeck.toml names (SQLite's dialect; whole-table queries are fine in tests)."""
    url = store_url_of(db)
    if url is not None:
        import psycopg

        with psycopg.connect(url) as pg:
            return [tuple(r) for r in pg.execute(pg_spelling(sql), params).fetchall()]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def fts_rows(db: Path, table: str) -> set[int]:
    """The rowids a full-text index holds, after checking that it is sound (the check
    raises sqlite3.DatabaseError on a corrupt index)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 0)")
        return {r[0] for r in conn.execute(f"SELECT id FROM {table}_docsize")}
    finally:
        conn.close()


def fts_unsound(db: Path) -> list[str]:
    """What is wrong with the full-text indexes of a room whose last batch ran: each is
    sound, and holds exactly the settled or suspended calls and the user or assistant texts
    (with nothing left queued)."""
    try:
        calls, messages = fts_rows(db, "calls_fts"), fts_rows(db, "messages_fts")
    except sqlite3.DatabaseError as exc:
        return [f"{exc}"]
    ids = lambda sql: {r[0] for r in truth(db, sql)}  # noqa: E731
    wrong = []
    if calls != ids(
        "SELECT rowid FROM tool_calls WHERE status NOT IN ('new', 'running', 'resuming')"
    ):
        wrong.append("calls_fts holds other calls than the settled and suspended ones")
    if messages != ids("SELECT id FROM messages WHERE role != 'tool' AND text != ''"):
        wrong.append("messages_fts holds other messages than user and assistant texts")
    if truth(
        db, "SELECT (SELECT count(*) FROM fts_queue) + (SELECT count(*) FROM fts_unindex)"
    ) != [(0,)]:
        wrong.append("calls left queued for indexing")
    return wrong


def marks_unsound(db: Path) -> list[str]:
    """What is wrong with the marks tool calls give their turns in a room whose last batch
    ran (engine/store/index_batch.py): turn_marks holds exactly tool:<name>, is:failed and
    is:denied as the rows say, the counters count them, and the batch's state is caught up."""
    want = set(
        truth(
            db,
            """
        SELECT 'tool:' || c.tool, t.created_at, t.id FROM tool_calls c JOIN turns t ON t.id = c.turn_id
        UNION SELECT 'is:failed', t.created_at, t.id FROM turns t WHERE t.reason = 'error'
            OR EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id AND c.status = 'failed')
        UNION SELECT 'is:denied', t.created_at, t.id FROM turns t WHERE EXISTS (SELECT 1
            FROM tool_calls c JOIN decisions d ON d.id = c.decision_id
            WHERE c.turn_id = t.id AND c.status = 'cancelled' AND d.action = 'cancel')""",
        )
    )
    have = set(
        truth(
            db,
            "SELECT mark, created_at, turn_id FROM turn_marks"
            " WHERE mark LIKE 'tool:%' OR mark IN ('is:failed', 'is:denied')",
        )
    )
    wrong = []
    if have != want:
        wrong.append(
            f"call marks: missing {sorted(want - have)[:3]}, extra {sorted(have - want)[:3]}"
        )
    counted = dict(
        truth(
            db,
            "SELECT name, value FROM counters WHERE name LIKE 'tool:%'"
            " OR name IN ('is:failed', 'is:denied')",
        )
    )
    sizes: dict[str, int] = {}
    for mark, _, _ in have:
        sizes[mark] = sizes.get(mark, 0) + 1
    if {k: v for k, v in counted.items() if v} != sizes:
        wrong.append("counters of call marks differ from turn_marks")
    if truth(db, "SELECT value FROM counters WHERE name = 'marks:calls'") != truth(
        db, "SELECT coalesce(max(rowid), 0) FROM tool_calls"
    ):
        wrong.append("the batch's watermark is not at the last call")
    if set(truth(db, "SELECT rowid FROM open_calls")) != set(
        truth(
            db,
            "SELECT rowid FROM tool_calls WHERE status IN ('new', 'running', 'suspended', 'resuming')",
        )
    ):
        wrong.append("open_calls is not the open calls")
    return wrong


def turn_ids(db: Path, where: str = "true", *params: Any) -> list[str]:
    """Turn ids, newest first, that satisfy `where` (on turns t)."""
    return [r[0] for r in truth(db, f"SELECT t.id FROM turns t WHERE {where}"
                                    " ORDER BY t.created_at DESC, t.id DESC", *params)]  # fmt: skip


STATUS_TRUTH = {
    "running": "t.status = 'running'",
    "waiting": "t.status = 'waiting'",
    "done": "t.status = 'done'",
    "failed": "t.reason = 'error' OR EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id"
    " AND c.status = 'failed')",
    "denied": "EXISTS (SELECT 1 FROM tool_calls c JOIN decisions d ON d.id = c.decision_id"
    " WHERE c.turn_id = t.id AND c.status = 'cancelled' AND d.action = 'cancel')",
    "cancelled": "t.reason = 'cancelled'",
}
