"""A room on a read-only filesystem (a mounted backup, a full or remounted disk): what only
reads it works, what would write says so in one line with exit 2, and nothing hangs or
prints a traceback (issue 25, a low item: `history` printed a traceback and never exited,
`start` showed an OSError traceback). The room is bind-mounted read-only, so that root,
which writes through any file mode, cannot write it either."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import aiosqlite
import anyio
import pytest

from console.cli import main as console_main
from engine.cli import main
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.wait import until_sync


async def a_turn(room: Path) -> str:
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t1",
                                        text="calc 6*7"))  # fmt: skip
        return out.turn_id


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(a room with one turn, mounted read-only; the turn's id)."""
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    turn_id = anyio.run(a_turn, source / "room")
    if not shutil.which("mount"):
        pytest.skip("no mount(8) here")
    bind = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode(errors='replace').strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield mounted / "room", turn_id
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_history_reads_a_read_only_room(read_only, capsys) -> None:
    room, turn_id = read_only
    before = connections()
    assert main(["--room", str(room), "history"]) == 0, capsys.readouterr().err
    assert turn_id in capsys.readouterr().out
    assert main(["--room", str(room), "history", "--turn", turn_id]) == 0
    assert "calc 6*7" in capsys.readouterr().out
    # no connection's thread left behind (one kept the process alive for ever)
    until_sync(connections, "the connections' threads end", ok=lambda now: now <= before)


def connections() -> set[threading.Thread]:
    """The SQLite connections' threads alive now (aiosqlite runs one per connection)."""
    worker = aiosqlite.core._connection_worker_thread
    return {t for t in threading.enumerate() if getattr(t, "_target", None) is worker}


def test_pending_and_rules_read_a_read_only_room(read_only, capsys) -> None:
    """They open no run (issue 28), so a mounted backup answers them."""
    room, _ = read_only
    assert main(["--room", str(room), "pending", "--json"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "[]"
    assert main(["--room", str(room), "rules", "--json"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "[]"


@pytest.mark.parametrize("command", [["start"], ["run"], ["invoke", "hello"]])
def test_what_would_write_a_read_only_room_is_one_line_and_exit_2(
    read_only, capsys, command: list[str]
) -> None:
    room, _ = read_only
    assert main(["--room", str(room), *command]) == 2
    assert "cannot be written: Read-only file system" in one_line(capsys)


def test_the_console_on_a_read_only_room_is_one_line_and_exit_2(read_only, capsys) -> None:
    room, _ = read_only
    assert console_main(["--room", str(room)]) == 2
    assert "cannot be written: Read-only file system" in one_line(capsys)
