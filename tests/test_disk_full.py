"""A full disk under the room (issue 25, a low item: the background runtime exited with
four tracebacks). A write that does not fit stops only what it was for: a turn stops at
its last checkpoint and waits as a crash would leave it, a new request is refused with a
clear notice, and the runtime goes on serving reads and what fits. Once space is freed,
the stopped turn goes on (its call whose result never reached the disk is reviewed, never
run twice). The room lives on a small tmpfs, so the disk is really full."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from engine.domain.decisions import Decision
from engine.domain.events import Event, Notice
from engine.lifecycle.call import REVIEW_REASON
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.store import DiskFull
from engine.store.sqlite import SqliteStore
from engine.tools.builtin import builtin_tools
from tests.helpers import msg
from tests.wait import until

pytestmark = pytest.mark.anyio
COMMAND = "echo x >> ran.log; head -c 300000 /dev/zero | tr '\\0' a"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs."""
    where = tmp_path / "disk"
    where.mkdir()
    if not shutil.which("mount"):
        pytest.skip("no mount(8) here")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                          capture_output=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A ballast file that leaves `leave` bytes free."""
    ballast = disk / "ballast"
    st = os.statvfs(disk)
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return ballast


def fill_all(disk: Path, db: Path, write_lock: threading.Lock) -> Path:
    """No byte left free, and execution.db's WAL emptied first, so that the next write of
    the room's truth finds the disk full (a WAL that SQLite starts over is written again in
    place, which a full tmpfs allows: `fill` leaves which write fails first to chance)."""
    with write_lock:  # (the store's writer and its WAL checkpointer wait meanwhile)
        with closing(sqlite3.connect(db, timeout=60)) as conn:
            busy, frames, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert (busy, frames) == (0, 0), "the WAL was not emptied"
        ballast = disk / "ballast"
        with open(ballast, "wb", buffering=0) as f:
            try:
                while f.write(b"\0" * 65536):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return ballast


def error_notices(rt: Runtime) -> list[str]:
    """The texts of the error notices `rt` gives from now on."""
    notices: list[str] = []

    def heard(event: Event) -> None:
        if isinstance(event, Notice) and event.level == "error":
            notices.append(event.text)

    rt.subscribe(heard)
    return notices


async def test_a_full_disk_stops_one_turn_refuses_new_work_and_loses_nothing(disk: Path) -> None:
    async with Runtime.open(disk / "room", kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        notices = error_notices(rt)
        out = await rt.run_turn(msg(f"run `{COMMAND}`", "big"))
        assert out.status == "waiting"
        [call] = await rt.pending()
        ballast = fill(disk, leave=48 * 1024)  # the decision fits; the call's result does not
        assert await rt.decide(Decision.approve(call.call_id, args=call.args)) == "queued"
        await until(lambda: rt.scheduler.holder("big"), "the turn stops at its checkpoint",
                    ok=lambda held: held == (out.turn_id, "waiting") and not rt.live)  # fmt: skip
        assert any("disk holding the room is full" in n for n in notices), notices
        # new work is refused, and nothing of it stays in line
        with pytest.raises(DiskFull):
            await rt.submit(msg("x" * 200_000, "other"))
        assert not rt.scheduler.statistics().queued
        # reads go on (where the turn stopped depends on which write did not fit first)
        assert (await rt.outcome(out.turn_id)).status in ("running", "waiting")
        await rt.pending()
        ballast.unlink()  # space again: the stopped turn goes on, as after a crash
        await rt.settle_thread("big")
        after = await rt.outcome(out.turn_id)
        if after.status == "waiting":  # its call ran, and its result never reached the disk
            [review] = await rt.pending()
            assert (review.call_id, review.reason) == (call.call_id, REVIEW_REASON)
        else:  # the decision was applied when it went on
            assert (after.status, after.reason) == ("done", "natural")
        assert (await rt.run_turn(msg("calc 6*7", "other"))).status == "done"
    ran = (disk / "room" / "workspace" / "ran.log").read_text()
    assert ran in ("x\n", "")  # once at most (its echo may not have fit on the full disk)


async def test_a_full_disk_when_a_resumed_turn_reopens_stops_it_until_space_returns(
    disk: Path,
) -> None:
    """The decision is recorded, then the disk is full before its turn runs again: the
    turn's first write (waiting -> running) fails. The turn stops where it was, as a
    `_drive` stopped by a full disk leaves one, and the runtime goes on."""
    async with Runtime.open(disk / "room", kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        notices = error_notices(rt)
        out = await rt.run_turn(msg("run `echo x >> ran.log`", "big"))
        assert out.status == "waiting"
        [call] = await rt.pending()
        assert await rt.decide(Decision.approve(call.call_id, args=call.args)) == "queued"
        # its resumption is spawned, not yet run: nothing awaits between here and the fill
        assert isinstance(rt.store, SqliteStore)
        ballast = fill_all(disk, rt.store.file, rt.store._write_lock)
        await until(lambda: rt.scheduler.holder("big"), "the turn stops where it was",
                    ok=lambda held: held == (out.turn_id, "waiting") and not rt.live)  # fmt: skip
        assert any(out.turn_id in n and "disk holding the room is full" in n for n in notices), (
            notices
        )
        # nothing of it changed: still waiting, its call still suspended, never run
        assert (await rt.outcome(out.turn_id)).status == "waiting"
        assert [p.call_id for p in await rt.pending()] == [call.call_id]
        assert not (disk / "room" / "workspace" / "ran.log").exists()
        ballast.unlink()  # space again: the turn goes on, and takes its decision
        await rt.settle_thread("big")
        after = await rt.outcome(out.turn_id)
        assert (after.status, after.reason) == ("done", "natural")
        assert (await rt.run_turn(msg("calc 6*7", "other"))).status == "done"
    assert (disk / "room" / "workspace" / "ran.log").read_text() == "x\n"


async def test_a_cancel_on_a_full_disk_is_refused_and_the_turn_waits_for_a_slot_as_it_did(
    disk: Path,
) -> None:
    """A decided turn waits for a slot (its group runs none); the operator's cancel cannot be
    recorded on a full disk: it is refused (the API answers 507), the turn stays as it was
    (never run), the runtime goes on, and a cancel once there is space ends it. (The cancel
    written and the turn's end not, a narrower race, parks the turn as `_drive` does:
    supervisor `_unslotted`.)"""
    async with Runtime.open(disk / "room", kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        out = await rt.run_turn(msg("run `echo x >> ran.log`", "big"))
        [call] = await rt.pending()
        await rt.configure_group("chat", max_running_turns=0)  # no slot for it to resume in
        assert await rt.decide(Decision.approve(call.call_id, args=call.args)) == "queued"
        await until(lambda: rt.scheduler.holder("big"), "the turn waits for a slot",
                    ok=lambda held: held == (out.turn_id, "resumed"))  # fmt: skip
        assert isinstance(rt.store, SqliteStore)
        ballast = fill_all(disk, rt.store.file, rt.store._write_lock)
        with pytest.raises(DiskFull):
            await rt.cancel_turn(out.turn_id)
        assert rt.scheduler.holder("big") == (out.turn_id, "resumed")
        assert (await rt.outcome(out.turn_id)).status == "waiting"
        ballast.unlink()
        assert await rt.cancel_turn(out.turn_id)
        done = await rt.wait_turn(out.turn_id)
        assert (done.status, done.reason) == ("done", "cancelled")
    assert not (disk / "room" / "workspace" / "ran.log").exists()
