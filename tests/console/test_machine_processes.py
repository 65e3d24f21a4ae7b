"""One console over rooms other processes own (issue 38): two rooms, each owned by its own
`agentdeck run`, their calls in one inbox, decided from it, each applied in its own room;
an owner killed (SIGKILL) shows `owner gone` at once."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.screens.rooms import RoomsScreen
from console.widgets.decision_queue import DecisionQueue
from console.widgets.rooms_table import RoomsTable
from engine.api.remote import RemoteClient
from engine.domain.decisions import args_digest
from engine.room import Room
from tests.console.conftest import build
from tests.console.helpers import SIZE, until
from tests.console.test_attached import Owner
from tests.helpers import room_rows
from tests.wait import PATIENCE

pytestmark = pytest.mark.anyio


@pytest.fixture
def owners(tmp_path: Path) -> Iterator[dict[str, Owner]]:
    made = {}
    for name in ("alpha", "beta"):
        (tmp_path / name / "tasks").mkdir(parents=True)
        made[name] = Owner(tmp_path / name)
    try:
        yield made
    finally:
        for owner in made.values():
            owner.stop(signal.SIGKILL)


def task(owner: Owner, name: str, text: str) -> None:
    (owner.room / "tasks" / f"{name}.md").write_text(text)


def call(room: Path, call_id: str) -> tuple[Any, ...] | None:
    rows = room_rows(room, "SELECT status, result FROM tool_calls WHERE id=?", call_id)
    return tuple(rows[0]) if rows else None


def decided(room: Path) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in room_rows(room, "SELECT call_id, action, args_hash, status "
                                              "FROM decisions ORDER BY created_at")]  # fmt: skip


async def test_one_inbox_over_two_owners_and_an_owner_killed(
    tmp_path: Path, owners: dict[str, Owner]
) -> None:
    alpha, beta = owners["alpha"], owners["beta"]
    pids = {"alpha": alpha.start(), "beta": beta.start()}
    app = build(tmp_path / "here")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape", "o")
        screen = await until(pilot, lambda: app.screen, "the rooms overview",
                             ok=lambda s: isinstance(s, RoomsScreen))  # fmt: skip
        machine = screen.machine
        await until(pilot, lambda: {f.label: (f.owner, f.reg.pid) for f in machine.feeds.values()},
                    "both owners serving, as they registered",
                    ok=lambda seen: {k: seen.get(k) for k in pids} == {
                        k: ("serving", pid) for k, pid in pids.items()})  # fmt: skip
        for owner in owners.values():  # an inbox of rooms costs each room one event stream
            assert (await RemoteClient(Room.at(owner.room)).info()).streams == 1
        task(alpha, "a", "run `echo from-alpha`\n")
        task(beta, "b", "run `echo from-beta`\n")
        queue = screen.query_one(DecisionQueue)
        await until(pilot, lambda: sorted(c.thread_id for c in screen._shown.values()),
                    "a call from each room in the one inbox",
                    ok=lambda t: t == ["alpha › task:a", "beta › task:b"])  # fmt: skip
        shown = {c.thread_id.partition(" › ")[0]: c for c in screen._shown.values()}
        queue.move_cursor(row=0, animate=False)
        await pilot.press("a")  # the first row, then the next: the cursor goes on to it
        await until(pilot, lambda: queue.row_count, "one left", ok=lambda n: n == 1)
        await pilot.press("a")
        for name, owner in owners.items():  # each applied in its own room, by its owner
            c = shown[name]
            await until(pilot, lambda c=c, owner=owner: call(owner.room, c.call_id),
                        f"{name}'s call ran", ok=lambda r: r is not None and r[0] == "succeeded")  # fmt: skip
            assert f"from-{name}" in str(call(owner.room, c.call_id))
            assert decided(owner.room) == [(c.call_id, "resume", args_digest(c.args), "applied")]
        await until(pilot, lambda: queue.row_count, "the inbox is empty", ok=lambda n: n == 0)

        # a call waits in beta, and its owner is killed
        task(beta, "c", "run `echo again`\n")
        await until(pilot, lambda: [c.thread_id for c in screen._shown.values()],
                    "beta's new call", ok=lambda t: t == ["beta › task:c"])  # fmt: skip
        assert beta.proc is not None
        beta.proc.send_signal(signal.SIGKILL)
        beta.proc.wait(timeout=PATIENCE)  # dead: the kernel has freed the room's lock
        looks = machine.looks
        feed = machine.feeds[beta.room]
        await until(pilot, lambda: feed.owner, "owner gone", ok=lambda o: o == "owner gone")
        assert machine.looks <= looks + 2  # within a second or two (a look a second)
        assert queue.row_count == 0  # nothing decides its call until an owner serves it
        row = screen.query_one(RoomsTable).get_row(str(beta.room))
        assert "owner gone" in str(row[1]) and machine.feeds[alpha.room].serving
        await app.shutdown()
