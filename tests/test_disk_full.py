"""A full disk under the room (issue 25, a low item: the background runtime exited with
four tracebacks). A write that does not fit stops only what it was for: a turn stops at
its last checkpoint and waits as a crash would leave it, a new request is refused with a
clear notice, and the runtime goes on serving reads and what fits. Once space is freed,
the stopped turn goes on (its call whose result never reached the disk is reviewed, never
run twice). The room lives on a small tmpfs, so the disk is really full."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.domain.decisions import Decision
from engine.domain.events import Event, Notice
from engine.lifecycle.call import REVIEW_REASON
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.store import DiskFull
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


async def test_a_full_disk_stops_one_turn_refuses_new_work_and_loses_nothing(disk: Path) -> None:
    notices: list[str] = []

    def heard(event: Event) -> None:
        if isinstance(event, Notice) and event.level == "error":
            notices.append(event.text)

    async with Runtime.open(disk / "room", kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        rt.subscribe(heard)
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
