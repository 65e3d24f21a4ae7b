"""The room's loop folders: whoever runs the loops (`run`, `start`, a hosting console)
makes `tasks/` and `chores/`, private to the owner, so dropping a file in needs no mkdir;
a one-off runtime makes none; `agentdeck info` lists them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from engine.cli import main
from engine.domain.events import Notice
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime

pytestmark = pytest.mark.anyio


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_running_the_loops_makes_the_loop_folders_private(tmp_path: Path) -> None:
    room = tmp_path / "room"
    async with Runtime.open(room, kind="invoke", provider=OfflineModel(delay=0)):
        pass
    assert not (room / "tasks").exists()  # a one-off runs no loop, and makes no folder
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        start_loops(rt)
        assert {p.name: mode(p) for p in room.iterdir() if p.name in ("tasks", "chores")} == {
            "tasks": 0o700, "chores": 0o700}  # fmt: skip


async def test_a_loop_folder_that_cannot_be_made_is_a_notice(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "tasks").write_text("not a folder")
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        notices: list[Notice] = []
        rt.subscribe(lambda e: notices.append(e) if isinstance(e, Notice) else None)
        start_loops(rt)
        assert (room / "chores").is_dir()
    assert any("cannot make tasks/" in n.text and n.level == "warning" for n in notices), notices


def test_info_lists_the_loop_folders_with_the_room_shortened(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    room = tmp_path / "rooms" / "ops"
    room.mkdir(parents=True)
    assert main(["--room", str(room), "info"]) == 0
    out = capsys.readouterr().out
    assert "room:      ~/rooms/ops\n" in out
    assert "tasks:     ~/rooms/ops/tasks/ (not made yet: a runtime makes it)" in out
    (room / "chores").mkdir()
    (room / "chores" / "backup.toml").write_text('every = "1d"\ntext = "back up"\n')
    assert main(["--room", str(room), "info"]) == 0
    assert "chores:    ~/rooms/ops/chores/ (1 files)" in capsys.readouterr().out
