"""A room is private to its owner (issue 25, item 8): its folder 0700 and the files
agentdeck writes 0600, so another local user cannot read the conversation or the tool
arguments; a room an earlier release left open (0755, 0644) is tightened when it opens,
with a notice. Tests run as root, who reads any file: the reads here are made as `nobody`
(a subprocess that drops to that user id)."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.domain.messages import Message
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.wait import until

pytestmark = pytest.mark.anyio

NOBODY = 65534


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder every user may pass through (the test's tmp_path is root's alone, which
    would hide the room whatever its own mode)."""
    path = Path(tempfile.mkdtemp(prefix="agentdeck-privacy-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    return subprocess.run(command, capture_output=True, text=True, errors="replace",
                          preexec_fn=drop, timeout=60)  # fmt: skip


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def a_turn(room: Path) -> None:
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t1",
                                        text="calc 6*7"))  # fmt: skip
        assert out.status == "done"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
async def test_another_user_reads_nothing_of_a_room(base: Path) -> None:
    room = base / "room"
    await a_turn(room)
    assert mode(room) == 0o700 and mode(room / "workspace") == 0o700
    assert mode(room / "execution.db") == 0o600
    read = as_nobody("cat", str(room / "execution.db"))
    assert read.returncode != 0 and "Permission denied" in read.stderr
    listed = as_nobody("ls", str(room))
    assert listed.returncode != 0 and "Permission denied" in listed.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
async def test_an_open_room_is_made_private_when_it_opens(
    base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    room = base / "room"
    await a_turn(room)
    room.chmod(0o755)  # as an earlier release left it
    (room / "execution.db").chmod(0o644)
    (room / "workspace").chmod(0o755)
    assert as_nobody("cat", str(room / "execution.db")).returncode == 0
    with caplog.at_level(logging.WARNING, logger="agentdeck"):
        await a_turn(room)
    assert mode(room) == 0o700 and mode(room / "execution.db") == 0o600
    assert mode(room / "workspace") == 0o700
    [said] = {r.getMessage() for r in caplog.records if "readable by other users" in r.getMessage()}
    assert "execution.db" in said and "made private" in said
    assert as_nobody("cat", str(room / "execution.db")).returncode != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
async def test_the_bus_is_private_even_when_it_is_shared_outside_the_room(base: Path) -> None:
    """Found trying the product: bus/ was made 0755 and events.db 0644 (inside the room's
    0700 folder; a bus shared by several rooms, `[bus] path`, sits outside it)."""
    room, shared = base / "room", base / "shared" / "bus.db"
    room.mkdir(mode=0o700)
    (room / "agentdeck.toml").write_text(f'[bus]\npath = "{shared}"\n')
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        start_loops(rt)
        await until(lambda: shared.with_name("bus.db-wal").exists(), "the bus is open")
        assert mode(shared.parent) == 0o700
        assert {p.name: mode(p) for p in shared.parent.iterdir()} == {
            "bus.db": 0o600, "bus.db-wal": 0o600, "bus.db-shm": 0o600}  # fmt: skip
    shared.parent.chmod(0o755)  # even in a folder others may pass through
    read = as_nobody("cat", str(shared))
    assert read.returncode != 0 and "Permission denied" in read.stderr
