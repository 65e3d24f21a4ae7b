"""The bus projection (issue 17): a room's public events, copied from its truth to a bus
file several rooms share, caught up from the truth whenever the bus lags or is lost."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.config import BusConfig
from engine.domain.messages import Message
from engine.services.projector import Projector, bus_path
from engine.store.bus import Bus
from tests.helpers import rows, runtime
from tests.scripted import first_then
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
SECRET_ARG = "echo hunter2-in-the-args"


def chat(text: str, thread: str) -> Message:
    return Message(origin="chat", channel="console", sender="ann", thread_id=thread, text=text)


async def two_turns(rt: Any) -> tuple[str, str]:
    """One turn done, one waiting for its shell call."""
    done = await rt.run_turn(chat("add", "t-add"))
    waiting = await rt.run_turn(chat("run it", "t-shell"))
    assert (done.status, waiting.status) == ("done", "waiting")
    return done.turn_id, waiting.turn_id


def script(request: Any) -> Any:
    text = request.messages[-1].text if request.messages[-1].role == "user" else ""
    calls = [("add", {"a": 1, "b": 2})] if text == "add" else [("shell", {"command": SECRET_ARG})]
    return first_then(calls)(request)


def bus_rows(path: Path, sql: str, *params: Any) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_the_public_events_and_counts_are_projected(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "events.db"
    async with runtime(tmp_path, script) as rt:
        done_id, waiting_id = await two_turns(rt)
        bus = await Bus.open(path)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock, pid=4242)
        top = await projector.catch_up()
        truth = await rows(rt, "SELECT max(id) FROM events")
        assert top == truth[0][0]
        [room] = await bus.rooms()
        assert (room.room, room.name, room.running, room.waiting, room.pid, room.last_seq) == (
            str(rt.room.path),
            "room",
            0,
            1,
            4242,
            top,
        )
        events = await bus.events(str(rt.room.path))
        kinds = [(kind, turn) for _, _, kind, _, turn, _ in events]
        assert ("turn_started", done_id) in kinds and ("turn_changed", done_id) in kinds
        waits = [json.loads(d) for _, _, k, _, t, d in events if k == "call_changed"]
        assert waits == [{"call_id": waits[0]["call_id"], "tool": "shell", "status": "suspended"}]
        assert "step_finished" not in {k for _, k in kinds}
        assert "message_appended" not in {k for _, k in kinds}
        everything = " ".join(d for *_, d in events)
        assert "hunter2" not in everything and "run it" not in everything  # no args, no text
        # the seq is the truth's event id, so the bus can be compared with it row for row
        public = await rows(rt, "SELECT id FROM events WHERE kind IN ('turn_started',"
                                " 'turn_changed') ORDER BY id")  # fmt: skip
        assert [s for s, _, k, *_ in events if k in ("turn_started", "turn_changed")] == [
            i for (i,) in public
        ]
        assert await projector.catch_up() == top  # nothing new: nothing changes
        assert len(await bus.events(str(rt.room.path))) == len(events)
        await projector.stopped()
        assert (await bus.rooms())[0].pid is None
        await bus.close()


async def test_a_lost_or_lagging_bus_is_caught_up_from_the_truth(tmp_path: Path) -> None:
    path = bus_path(tmp_path / "room", BusConfig())
    async with runtime(tmp_path, script) as rt:
        assert path == rt.room.path / "bus" / "events.db"
        await two_turns(rt)
        bus = await Bus.open(path)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        await projector.catch_up()
        whole = await bus.events(str(rt.room.path))
        await bus.close()
        # a kill between the truth and the bus: the bus lost its last events
        cut = whole[len(whole) // 2][0]
        bus_rows(path, "DELETE FROM bus_events WHERE seq > ?", cut)
        bus_rows(path, "UPDATE rooms SET last_seq = ?", cut)
        bus = await Bus.open(path)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        await projector.catch_up()
        assert await bus.events(str(rt.room.path)) == whole
        await bus.close()
        # the bus file deleted: rebuilt whole
        for p in path.parent.iterdir():
            p.unlink()
        bus = await Bus.open(path)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        await projector.catch_up()
        assert await bus.events(str(rt.room.path)) == whole
        # a bus ahead of the truth (the room was made anew): projected anew
        bus_rows(path, "UPDATE rooms SET last_seq = 1000000")
        await projector.catch_up()
        assert await bus.events(str(rt.room.path)) == whole
        await bus.close()


async def test_a_clean_stop_leaves_the_bus_caught_up(tmp_path: Path) -> None:
    """What was committed after the projector's last pass (a delivery's last state change,
    just before SIGTERM) is on the bus once the runtime has stopped, not only after the next
    start (test_channel_crash found three such events missing under load)."""
    path = bus_path(tmp_path / "room", BusConfig())
    async with runtime(tmp_path, script) as rt:
        bus = await Bus.open(path)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        await projector.catch_up()
        await two_turns(rt)  # committed; no pass has run since
        await projector.stopped()
        truth = [r[0] for r in await rows(rt, "SELECT id FROM events ORDER BY id")]
        on_bus = [e[0] for e in await bus.events(str(rt.room.path))]
        await bus.close()
    assert on_bus and set(on_bus) <= set(truth)
    assert bus_rows(path, "SELECT pid, last_seq FROM rooms") == [(None, max(truth))]


async def test_two_rooms_share_one_bus(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    async with runtime(tmp_path / "a", script) as a, runtime(tmp_path / "b", script) as b:
        await two_turns(a)
        await b.run_turn(chat("add", "only"))
        bus_a, bus_b = await Bus.open(path), await Bus.open(path)  # as two processes would
        pa = Projector(a.store, bus_a, a.room.path, clock=a.clock)
        pb = Projector(b.store, bus_b, b.room.path, clock=b.clock)
        async with anyio.create_task_group() as tg:  # at once: both write the one file
            tg.start_soon(pa.catch_up)
            tg.start_soon(pb.catch_up)
        rooms = {r.room: (r.running, r.waiting) for r in await bus_a.rooms()}
        assert rooms == {str(a.room.path): (0, 1), str(b.room.path): (0, 0)}
        seqs_a = [e[0] for e in await bus_a.events(str(a.room.path))]
        seqs_b = [e[0] for e in await bus_a.events(str(b.room.path))]
        assert seqs_a and seqs_b and set(seqs_b) <= set(seqs_a)  # the same seqs, two rooms
        await bus_a.close()
        await bus_b.close()


async def test_a_poke_projects_what_a_commit_wrote(tmp_path: Path) -> None:
    async with runtime(tmp_path, script) as rt:
        bus = await Bus.open(tmp_path / "events.db")
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        rt.subscribe(lambda _: projector.poke())
        async with anyio.create_task_group() as tg:
            tg.start_soon(projector.run, 3600.0)  # only pokes make it catch up in time
            out = await rt.run_turn(chat("run it", "t-shell"))
            await until(bus.rooms, "the bus shows the room's turn waiting",
                        ok=lambda rooms: rooms and rooms[0].waiting == 1)  # fmt: skip
            kinds = {e[2] for e in await bus.events(str(rt.room.path)) if e[4] == out.turn_id}
            assert {"turn_started", "call_changed", "turn_changed"} <= kinds
            tg.cancel_scope.cancel()
        await bus.close()
