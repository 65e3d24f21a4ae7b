"""What the pulse loop's fires become in a real runtime: a full queue leaves them waiting
(said, not dropped), and a fire becomes exactly one turn request, even when the process
dies between committing the request and writing pulse.json."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.domain.events import Event
from engine.domain.messages import Message
from engine.loops.pulse import PulseLoop
from engine.runtime import Runtime
from tests.helpers import on
from tests.scripted import ScriptedModel, first_then
from tests.test_pulse import T0
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def open_room(room: Path) -> Any:
    return Runtime.open(room, provider=ScriptedModel(first_then([])), tools=[])


def pulse(
    rt: Runtime, clock: Clock, notices: list[tuple[str, str]], submit: Any = None
) -> PulseLoop:
    """A pulse loop over the runtime's room, submitting as `engine.loops.start.start_loops` does."""

    async def to_runtime(message: Message, **kw: Any) -> Any:
        return await rt.submit(message, strategy=message.meta.get("strategy"), **kw)

    return PulseLoop(rt.room, submit or to_runtime, lambda lv, t: notices.append((lv, t)),
                     clock=clock)  # fmt: skip


async def all_ran(rt: Runtime) -> None:
    """Every request the runtime holds has run."""
    await until(lambda: list(rt.live), "every request the runtime holds has run",
                ok=lambda live: not live)  # fmt: skip


async def requests(rt: Runtime) -> list[tuple[str, str]]:
    rows = await on(rt.store).fetchall(
        "SELECT thread_id, status FROM turn_requests ORDER BY created_at, id"
    )
    return [(r[0], r[1]) for r in rows]


def fired(room: Path, table: str) -> set[str]:
    return set(json.loads((room / "pulse.json").read_text())[table])


async def test_a_full_queue_leaves_tasks_pending_and_says_how_many_wait(tmp_path: Path) -> None:
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    (room / "agentdeck.toml").write_text("[groups.task]\npaused = true\nmax_queued_turns = 3\n")
    names = [f"t{i:02d}" for i in range(10)]
    for name in names:
        (room / "tasks" / f"{name}.md").write_text(f"Task {name}.")
    notices: list[tuple[str, str]] = []
    async with open_room(room) as rt:
        loop = pulse(rt, Clock(), notices)
        assert [m.thread_id for m in await loop.tick()] == ["task:t00", "task:t01", "task:t02"]
        assert fired(room, "tasks") == {"t00", "t01", "t02"}
        assert await loop.tick() == []
        [(level, text)] = notices
        assert level == "warning" and text.startswith("pulse: 7 tasks wait: group task queue")
        await rt.configure_group("task", paused=False)

        async def tick_once_all_ran() -> set[str]:
            await all_ran(rt)
            await loop.tick()
            return fired(room, "tasks")

        await until(tick_once_all_ran, "the pulse fired every task as the queue drained",
                    ok=lambda done: done == set(names))  # fmt: skip
        await all_ran(rt)
        got = await requests(rt)
    assert fired(room, "tasks") == set(names)
    assert sorted(got) == [(f"task:{name}", "admitted") for name in names]
    assert notices[-1][0] == "info" and "group task" in notices[-1][1]
    assert len(notices) == 2  # draining is not news; the end of the wait is


async def test_a_queued_request_dropped_by_overflow_is_said(tmp_path: Path) -> None:
    """The pulse never overflows a queue itself; when another submitter does, the request
    it drops is said, not only recorded in turn_requests."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text("[groups.task]\npaused = true\nmax_queued_turns = 1\n")
    events: list[Event] = []
    async with open_room(room) as rt:
        rt.subscribe(events.append)
        first = await rt.submit(Message(origin="task", sender="self", thread_id="task:a",
                                        text="a"))  # fmt: skip
        await rt.submit(Message(origin="task", sender="self", thread_id="task:b", text="b"))
    [notice] = [e for e in events if e.kind == "notice"]
    assert notice.level == "warning"  # type: ignore[union-attr]
    assert first.turn_id in notice.text and "dropped: queue full" in notice.text  # type: ignore[union-attr]


class Died(BaseException):
    """The process ends here (as under SIGKILL): nothing after this line runs."""


SOURCES = {
    "task": ("tasks/t.md", "Do it.", "task:t"),
    "chore": ("chores/c.toml", 'text = "Again."\nevery = "1m"\n', "chore:c"),
    "will": ("will.md", "Be kind.", "will:agent"),
}
PAUSED = "".join(f"[groups.{g}]\npaused = true\n" for g in ("task", "chore", "will"))


@pytest.mark.parametrize("restart", [False, True], ids=["same-runtime", "restarted"])
@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_a_fire_becomes_one_request_when_the_process_dies_after_submit(
    tmp_path: Path, source: str, restart: bool
) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(PAUSED)
    rel, text, thread = SOURCES[source]
    (room / rel).parent.mkdir(parents=True, exist_ok=True)
    (room / rel).write_text(text)
    clock, notices = Clock(), []
    async with open_room(room) as rt:
        if source == "chore":
            await pulse(rt, clock, notices).tick()  # first sight anchors the chore
            clock.now += 60

        async def submit_then_die(message: Message, **kw: Any) -> Any:
            await rt.submit(message, **kw)  # committed: the request is durable
            raise Died  # ...and pulse.json never hears of it

        with pytest.raises(Died):
            await pulse(rt, clock, notices, submit_then_die).tick()
        assert await requests(rt) == [(thread, "queued")]
        if not restart:
            await pulse(rt, clock, notices).tick()
            assert await requests(rt) == [(thread, "queued")]
    async with open_room(room) as rt:
        loop = pulse(rt, clock, notices)
        await loop.tick()
        assert await requests(rt) == [(thread, "queued")]
        assert await loop.tick() == []
        clock.now += 30  # no new occurrence, revision or interval: still nothing new
        await loop.tick()
        assert await requests(rt) == [(thread, "queued")]
    assert notices == []


@pytest.mark.one_store("an execution.db from before the keys: SQLite's own upgrade")
async def test_idempotency_keys_on_an_execution_db_made_before_them(tmp_path: Path) -> None:
    room = tmp_path / "room"
    async with open_room(room):
        pass
    with sqlite3.connect(room / "execution.db") as conn:
        conn.execute("DROP TABLE request_keys")  # as a room made before the keys existed
    conn.close()
    msg = Message(origin="task", sender="self", thread_id="task:x", text="x")
    async with open_room(room) as rt:
        first = await rt.submit(msg, key="task:x@1")
        again = await rt.submit(msg, key="task:x@1")
        other = await rt.submit(msg, key="task:x@2")
    assert again.turn_id == first.turn_id and other.turn_id != first.turn_id
    async with open_room(room) as rt:
        after = await rt.submit(msg, key="task:x@1")
        assert after.turn_id == first.turn_id
        assert len(await requests(rt)) == 2
