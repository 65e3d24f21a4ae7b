"""The outbox (issue 17): a turn from a delivering channel that ends with an answer owes it
to the channel, in the same transaction as its final checkpoint; other turns owe nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.domain.decisions import Decision
from engine.domain.events import DeliveryChanged
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.store import migrations
from engine.store.sqlite import SqliteStore
from tests.helpers import as_version, msg, on, rows, runtime
from tests.scripted import Reply, first_then

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
REPLY = {"chat_id": 42}


def tg(text: str, thread: str = "telegram:42", **meta: Any) -> Message:
    return Message(origin="chat", channel="telegram", sender="ann", thread_id=thread, text=text,
                   meta={"reply": REPLY, **meta})  # fmt: skip


def answer(request: ModelRequest) -> Reply:
    return Reply(text=f"you said {request.messages[-1].text}")


def spy_commits(rt: Any) -> list[tuple[str | None, list[str]]]:
    """Each commit the turns make: its checkpoint and the SQL of its ops (one transaction:
    EventBus.commit hands them to one `Store.write`)."""
    seen: list[tuple[str | None, list[str]]] = []
    real = rt.ctx.commit

    def commit(ops: list, events: list, **kw: Any) -> Any:
        seen.append((kw.get("checkpoint"), [rt.store.dialect.text(sql) for sql, _ in ops]))
        return real(ops, events, **kw)

    rt.ctx.commit = commit
    return seen


async def test_an_answer_is_owed_in_the_final_checkpoint(tmp_path: Path) -> None:
    async with runtime(tmp_path, answer) as rt:
        rt.ctx.delivering = frozenset({"telegram"})
        commits = spy_commits(rt)
        events: list[Any] = []
        rt.subscribe(events.append)
        out = await rt.run_turn(tg("hello"))
        assert out.status == "done"
        owed = await rows(rt, "SELECT turn_id, thread_id, channel, reply, text, key, state,"
                              " tries FROM outbox")  # fmt: skip
        assert owed == [(out.turn_id, "telegram:42", "telegram", json.dumps(REPLY),
                         "you said hello", out.turn_id, "pending", 0)]  # fmt: skip
        holding = [cp for cp, sqls in commits if any("INTO outbox" in s for s in sqls)]
        assert holding == ["run_finished"]
        done = [e for e in events if isinstance(e, DeliveryChanged)]
        assert [(e.key, e.state, e.channel) for e in done] == [(out.turn_id, "pending",
                                                                "telegram")]  # fmt: skip
        stored = await rows(rt, "SELECT count(*) FROM events WHERE kind='delivery_changed'")
        assert stored == [(1,)]


async def test_nothing_is_owed_without_a_delivering_channel(tmp_path: Path) -> None:
    async with runtime(tmp_path, answer) as rt:
        await rt.run_turn(tg("no channel configured"))
        rt.ctx.delivering = frozenset({"slack"})
        await rt.run_turn(tg("another channel delivers"))
        await rt.run_turn(msg("from the command line"))
        assert await rows(rt, "SELECT count(*) FROM outbox") == [(0,)]


async def test_a_failed_or_cancelled_turn_owes_nothing(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> Reply:
        raise RuntimeError("the model fell over")

    async with runtime(tmp_path, broken) as rt:
        rt.ctx.delivering = frozenset({"telegram"})
        out = await rt.run_turn(tg("fail"))
        assert (out.status, out.reason) == ("done", "error")
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})]), first_id=100) as rt:
        rt.ctx.delivering = frozenset({"telegram"})
        waiting = await rt.run_turn(tg("wait", thread="telegram:7"))
        assert waiting.status == "waiting"
        assert await rt.cancel_turn(waiting.turn_id)
        await rt.wait_turn(waiting.turn_id)
        assert await rows(rt, "SELECT count(*) FROM outbox") == [(0,)]


async def test_a_turn_resumed_in_a_later_run_owes_its_answer(tmp_path: Path) -> None:
    script = first_then([("shell", {"command": "ls"})])
    async with runtime(tmp_path, script) as rt:
        rt.ctx.delivering = frozenset({"telegram"})
        out = await rt.run_turn(tg("list"))
        assert out.status == "waiting"
        assert await rows(rt, "SELECT count(*) FROM outbox") == [(0,)]
    async with runtime(tmp_path, script, first_id=100) as rt:  # the turn comes from the truth
        rt.ctx.delivering = frozenset({"telegram"})
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        done = await rt.wait_turn(out.turn_id)
        assert done.status == "done"
        owed = await rows(rt, "SELECT turn_id, reply, text FROM outbox")
        assert owed == [(out.turn_id, json.dumps(REPLY), "shell: ran ls")]


@pytest.mark.one_store("SQLite's own migration (PRAGMA user_version)")
async def test_a_version_4_room_gains_the_outbox(tmp_path: Path) -> None:
    path = tmp_path / "execution.db"
    store = await SqliteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE outbox")
    as_version(conn, 4)
    conn.close()
    store = await SqliteStore.open(path)
    try:
        assert await on(store).scalar("PRAGMA user_version") == migrations.VERSION
        assert await on(store).scalar("SELECT count(*) FROM outbox") == 0
    finally:
        await store.close()
