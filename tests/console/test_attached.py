"""A console attached to a runtime in another process: the real owner (`agentdeck run`),
the real API over the room's socket, the real app driven by Pilot."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.notifications import Notify
from textual.pilot import Pilot

from console.app import AgentDeck, make_app
from console.bridge import Bridge
from console.screens.main import MainScreen
from console.widgets.decision_queue import DecisionQueue
from console.widgets.status_bar import StatusBar
from tests.console.conftest import KeysClock
from tests.console.helpers import SIZE, Recorder, until
from tests.helpers import room_rows
from tests.wait import PATIENCE

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


class Owner:
    """`agentdeck run` on a room, in its own process."""

    def __init__(self, room: Path) -> None:
        self.room = room
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> int:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "--room", str(self.room), "run"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("agentdeck run ")
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=PATIENCE)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Owner]:
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    owner = Owner(room)
    try:
        yield owner
    finally:
        owner.stop(signal.SIGKILL)


def attached_app(room: Path) -> AgentDeck:
    return make_app(room, attach=True, keys_clock=KeysClock())


async def attached(pilot: Pilot, pid: int) -> MainScreen:
    app: Any = pilot.app
    status = app.main.query_one(StatusBar)
    await until(pilot, lambda: status.mode == f"attached to pid {pid}", "attached")
    return app.main  # type: ignore[no-any-return]


def task(owner: Owner, name: str, text: str) -> None:
    (owner.room / "tasks" / f"{name}.md").write_text(text)


def turn_status(room: Path, thread: str) -> list[tuple[str, str | None]]:
    return room_rows(room, "SELECT status, reason FROM turns WHERE thread_id=? "
                     "ORDER BY created_at", thread)  # fmt: skip


async def test_an_attached_console_approves_what_the_owner_runs(owner: Owner) -> None:
    pid = owner.start()
    rec = Recorder(MainScreen.Acted)
    app = attached_app(owner.room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await attached(pilot, pid)
        task(owner, "greet", "run `echo attached-hi`\n")
        await until(pilot, lambda: main.state.pending, "the owner's call waits here")
        (call,) = main.state.pending.values()
        assert (call.tool, call.thread_id) == ("shell", "task:greet")
        await pilot.press("escape", "d", "a")
        await until(pilot, lambda: turn_status(owner.room, "task:greet") == [("done", "natural")],
                    "the owner's turn finished")  # fmt: skip
        await until(pilot, lambda: not main.state.pending, "the queue is empty")
        assert [(m.action, m.result) for m in rec.of(MainScreen.Acted)] == [("approve", "queued")]
        await app.shutdown()
    assert owner.proc is not None and owner.proc.poll() is None  # quitting left it running


async def test_two_attached_consoles_share_one_queue(owner: Owner) -> None:
    pid = owner.start()
    one, two = attached_app(owner.room), attached_app(owner.room)
    said = Recorder(Notify)
    async with one.run_test(size=SIZE) as p1, two.run_test(size=SIZE, message_hook=said) as p2:
        m1, m2 = await attached(p1, pid), await attached(p2, pid)
        task(owner, "a", "run `echo a`\n")
        task(owner, "b", "run `echo b`\n")
        await until(p1, lambda: len(m1.state.pending) == 2, "both wait in one")
        await until(p2, lambda: len(m2.state.pending) == 2, "both wait in two")
        first = next(iter(m1.state.pending))
        seen_by_two = m2.state.pending[first]
        m1.query_one(DecisionQueue).focus()
        await p1.press("a")  # the first row: the same call in both queues
        await until(p2, lambda: first not in m2.state.pending, "it left the other queue")
        assert len(m2.state.pending) == 1
        # the second operator decides the same call a moment late: recorded as a duplicate,
        # and that console says which decision won
        m2.post_message(DecisionQueue.Decide("approve", seen_by_two))
        await until(p2, lambda: any(re.search(r"was not applied: call already \w+ by d_",
                                              m.notification.message) for m in said.of(Notify)),
                    "says the other decision won")  # fmt: skip
        await one.shutdown()
        await two.shutdown()


async def test_a_killed_owner_is_said_and_a_new_one_is_attached(owner: Owner) -> None:
    pid = owner.start()
    app = attached_app(owner.room)
    rec = Recorder(Bridge.Detached, Bridge.Attached, MainScreen.Acted)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await attached(pilot, pid)
        task(owner, "k", "run `echo survived`\n")
        await until(pilot, lambda: main.state.pending, "the call waits")
        main.query_one(DecisionQueue).focus()
        await pilot.press("a")
        # the decision is durable once acknowledged; kill the owner right after
        await until(pilot, lambda: rec.of(MainScreen.Acted) and _acknowledged(owner.room),
                    "acked")  # fmt: skip
        owner.stop(signal.SIGKILL)
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.mode.startswith("detached"), "says so")
        assert rec.of(Bridge.Detached)
        gone = lambda: [n for n in app._notifications if n.title == "Runtime gone"]  # noqa: E731
        await until(pilot, gone, "the runtime gone is said")
        new_pid = owner.start()
        await attached(pilot, new_pid)
        await until(pilot, lambda: not gone(), "what was said is withdrawn: it is over")
        await until(pilot, lambda: turn_status(owner.room, "task:k") == [("done", "natural")],
                    "the decision taken before the kill applied")  # fmt: skip
        await until(pilot, lambda: not main.state.pending, "the queue is empty")
        await app.shutdown()


def _acknowledged(room: Path) -> bool:
    return bool(room_rows(room, "SELECT count(*) FROM decisions")[0][0])


async def test_a_hosting_console_fires_tasks_and_serves_the_cli(tmp_path: Path) -> None:
    """The console on a free room runs the pulse loop (a task dropped into tasks/ fires) and
    serves the room's API (the CLI in another process decides through it)."""
    import json

    from tests.console.conftest import build
    from tests.console.helpers import started

    room = tmp_path / "room"
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        assert main.query_one(StatusBar).mode == "hosted"
        await until(pilot, lambda: (room / "agent.sock").exists(), "the API is served")
        (room / "tasks").mkdir(exist_ok=True)
        (room / "tasks" / "drop.md").write_text("run `echo dropped`\n")
        await until(pilot, lambda: main.state.pending, "the task's call waits")
        code, out_text, err = await cli(room, "pending", "--json")  # never blocks the loop
        (call,) = json.loads(out_text)
        assert call["thread_id"] == "task:drop"
        code, out_text, err = await cli(room, "decide", call["call_id"], "approve")
        assert code == 0, err
        assert "dropped" in out_text
        await until(pilot, lambda: not main.state.pending, "the queue is empty")
        await app.shutdown()
    assert not (room / "agent.sock").exists()


async def cli(room: Path, *args: str) -> tuple[int, str, str]:
    """`agentdeck ARGS` in another process, awaited without blocking the app's loop."""
    import asyncio

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine.cli", "--room", str(room), *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_a_console_left_without_owner_can_host_the_room(owner: Owner) -> None:
    pid = owner.start()
    app = attached_app(owner.room)
    rec = Recorder(Bridge.Detached)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await attached(pilot, pid)
        await pilot.press("ctrl+o")  # refused: the room has an owner
        assert main.query_one(StatusBar).mode == f"attached to pid {pid}"
        owner.stop(signal.SIGTERM)
        await until(pilot, lambda: any(m.free for m in rec.of(Bridge.Detached)),
                    "says the room is free")  # fmt: skip
        await pilot.press("escape", "ctrl+o")
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.mode == "hosted", "hosts it")
        code, out, err = await cli(owner.room, "status")
        assert code == 0 and "(agentdeck console" in out, err
        await app.shutdown()
    code, out, err = await cli(owner.room, "status")
    assert code == 3  # quitting a hosting console releases the room
