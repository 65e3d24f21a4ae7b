"""The pulse follows no symbolic link (issue 25, item 10): `tasks/shadow.md` -> /etc/shadow
made a turn whose message was that file. A linked task, chore or will.md, or a linked tasks/
or chores/ folder, is reported (once: the pulse reports a file's problem once) and not read;
the other files still fire."""

from __future__ import annotations

from pathlib import Path

from engine.loops.pulse_files import scan_room

T0 = 1_767_268_800.0


def test_linked_files_and_folders_are_reported_and_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    (outside / "chore.toml").write_text('text = "leak"\nevery = "1h"\n')
    (outside / "tasks").mkdir()
    (outside / "tasks" / "far.md").write_text("a task from outside the room\n")
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    (room / "chores").mkdir()
    (room / "tasks" / "ok.md").write_text("a task of the room\n")
    (room / "tasks" / "shadow.md").symlink_to(outside / "shadow")
    (room / "chores" / "linked.toml").symlink_to(outside / "chore.toml")
    (room / "will.md").symlink_to(outside / "shadow")

    scan = scan_room(room, T0)
    assert [t.name for t in scan.tasks] == ["ok"]
    assert scan.chores == [] and scan.will is None
    linked = {m.path.name: m.reason for m in scan.malformed}
    assert set(linked) == {"shadow.md", "linked.toml", "will.md"}
    assert all("symbolic link" in reason for reason in linked.values())
    assert "secret-hash" not in repr(scan)

    (room / "tasks" / "ok.md").unlink()
    (room / "tasks" / "shadow.md").unlink()
    (room / "tasks").rmdir()
    (room / "tasks").symlink_to(outside / "tasks")
    scan = scan_room(room, T0)
    assert scan.tasks == []
    assert {m.path.name for m in scan.malformed} >= {"far.md"}


def test_a_chore_file_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    """It was reported as 'a number has more than 4300 digits' (issue 25, low)."""
    room = tmp_path / "room"
    (room / "chores").mkdir(parents=True)
    (room / "chores" / "latin.toml").write_bytes('text = "café"\nevery = "1h"\n'.encode("latin-1"))
    [bad] = scan_room(room, T0).malformed
    assert bad.reason == "not UTF-8 text (byte 0xe9 at offset 11)"
