"""The rooms overview and its inbox (issue 38) for snapshots and screenshots: three rooms
on this machine, each with a call waiting, decided from one screen.

The console hosts its own room (`room`, a chat call made at T0); beside it two more
rooms are owned in this process by runtimes of their own, each serving its socket and so
registered (engine/rooms_registry.py): `alpha`, whose `make deploy` waits since five
minutes before T0 with a ten-minute deadline, and `beta`, whose note waits since two
minutes before T0. Each runtime has a fixed clock and ids of its own (a call's id is
unique on the machine, as the runtime's random ids are). So that the rows hold still,
each entry is written again with a fixed pid and start, and the lock's holder is read as
that pid (`hold_as_registered`): the rooms' locks are this process's.

Needs input first, the inbox reads: alpha's call (its deadline), beta's (the older of
the two without one), then the console's own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from console.screens.rooms import RoomsScreen
from console.widgets.decision_queue import DecisionQueue
from console.widgets.rooms_table import RoomsTable
from engine import rooms_registry
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.room import Room
from tests.console.conftest import T0
from tests.console.helpers import until
from tests.console.scenes import steady

# room -> (its ids' tag, minutes before T0 its clock stands, its owner's pid as shown,
#          its thread, what it is asked, its agentdeck.toml)
ROOMS = {
    "alpha": ("a", 5, 4101, "task:deploy", "run `make deploy`",
              '[approvals]\ndeadline = "10m"\n'),
    "beta": ("b", 2, 4102, "task:notes", 'write "v2 is out" to NOTES.md', ""),
}  # fmt: skip
OWN_PID = 4100  # the console's own room, as shown


def hold_as_registered(pids: dict[Path, int]) -> None:
    """Read each room's lock as held by the pid its entry names (they are all held by
    this process): the overview's pid column holds still. A test restores the function
    (monkeypatch); the screenshot script's process ends."""
    rooms_registry.lock_holder = lambda room, locks=None: pids.get(room.path)  # type: ignore[assignment]


async def own_room(path: Path, tag: str, minutes: int, thread: str, text: str,
                   ready: anyio.Event) -> None:  # fmt: skip
    """A room owned and served in this process until the app ends, one call waiting."""
    from engine.loops.server import serve_api
    from engine.runtime import Runtime

    counter = itertools.count(1)
    ids: Callable[[str], str] = lambda p: f"{p}_{tag}{next(counter):03d}"  # noqa: E731
    async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0), ids=ids,
                            clock=lambda: T0 - 60 * minutes) as rt, serve_api(rt):  # fmt: skip
        await rt.submit(Message(origin="invoke", sender="operator", thread_id=thread, text=text))
        ready.set()
        await anyio.sleep_forever()


async def open_rooms(pilot: Pilot) -> RoomsScreen:
    """The three rooms registered and waiting, then `o`."""
    app: Any = pilot.app
    here = app.room.path
    pids = {here: OWN_PID}
    for name, (tag, minutes, pid, thread, text, toml) in ROOMS.items():
        path = here.parent / name
        path.mkdir(mode=0o700, exist_ok=True)
        if toml:
            (path / "agentdeck.toml").write_text(toml)
        ready = anyio.Event()
        app.run_worker(own_room(path, tag, minutes, thread, text, ready), group="rooms")
        await ready.wait()
        pids[path] = pid
    await until(pilot, lambda: app.host.runtime is not None, "the console's runtime")
    await app.host.runtime.submit(Message(origin="chat", channel="console", sender="operator",
                                          thread_id="chat:main", text="run `git status`"))  # fmt: skip
    await until(pilot, lambda: len(rooms_registry.listing().rooms) == 3, "three rooms registered",
                seen=lambda: rooms_registry.listing())  # fmt: skip
    for reg in rooms_registry.listing().rooms:  # a fixed pid and start, as shown
        minutes = next((m for n, (_, m, *_r) in ROOMS.items() if reg.room.name == n), 0)
        rooms_registry.register(Room(reg.room), kind=reg.kind, run_id=reg.run_id,
                                pid=pids[reg.room], started_at=T0 - 3600 - 60 * minutes)  # fmt: skip
    hold_as_registered(pids)
    await pilot.press("escape", "o")
    screen = await until(pilot, lambda: app.screen, "the rooms overview",
                         ok=lambda s: isinstance(s, RoomsScreen))  # fmt: skip
    assert isinstance(screen, RoomsScreen)
    return screen


def settled(screen: RoomsScreen) -> bool:
    """Every room served and counted, and the inbox shows each room's call."""
    feeds = list(screen.machine.feeds.values())
    return (len(feeds) == 3 and all(f.serving and f.waiting == 1 for f in feeds)
            and screen.query_one(DecisionQueue).row_count == 3
            and screen.query_one(RoomsTable).row_count == 3)  # fmt: skip


async def settle(pilot: Pilot, screen: RoomsScreen) -> None:
    """Every room counted and its call in the inbox, the cursor on the first row (a call
    that came in above the cursor leaves it where it was)."""
    await until(pilot, lambda: settled(screen), "three rooms, three calls",
                seen=lambda: [(f.label, f.owner, f.waiting) for f in screen.machine.feeds.values()])  # fmt: skip
    screen.query_one(DecisionQueue).move_cursor(row=0, animate=False)
    await pilot.pause()


async def inbox(pilot: Pilot) -> None:
    await settle(pilot, await open_rooms(pilot))
    await steady(pilot)


MACHINE_SCENES = {"inbox": (inbox, (160, 48), {}), "inbox_narrow": (inbox, (80, 24), {})}
