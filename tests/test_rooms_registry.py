"""The machine's registry of rooms (issue 38, engine/rooms_registry.py): where it lives,
what an entry holds, that alive is the lock's word (never the file's), that a file there
that is not an entry never crashes anything and is never deleted, that pruning removes
only the entries of rooms whose owner is gone, and that another user reads nothing of
it. Tests run as root, who reads any file: those reads are made as `nobody`."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import rooms_registry
from engine.api.machine import labels, needs_input_first
from engine.room import Ownership, Room, shown
from engine.rooms_registry import RegistryError, entry_name, folder, listing, look, prune
from tests.test_room_privacy import NOBODY, as_nobody


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Room]:
    """A room this process owns (its lock held), as a serving owner holds it."""
    room = Room.at(tmp_path / "room")
    room.create()
    ownership = Ownership(room, "run")
    ownership.acquire()
    yield room
    ownership.release()


def test_the_registry_is_under_the_runtime_folder_else_the_state_folder(tmp_path: Path) -> None:
    run, state = tmp_path / "run", tmp_path / "state"
    run.mkdir(mode=0o700)
    assert folder({"XDG_RUNTIME_DIR": str(run)}) == run / "agentdeck" / "rooms"
    fallback = state / "agentdeck" / "rooms"
    (tmp_path / "a-file").write_text("")
    for bad in ("", "relative/run", str(tmp_path / "missing"), str(tmp_path / "a-file")):
        assert folder({"XDG_RUNTIME_DIR": bad, "XDG_STATE_HOME": str(state)}) == fallback
    if os.geteuid() == 0:  # a runtime folder of another user's is not this user's
        os.chown(run, NOBODY, NOBODY)
        assert folder({"XDG_RUNTIME_DIR": str(run), "XDG_STATE_HOME": str(state)}) == fallback
    home = Path.home()
    assert folder({}) == home / ".local" / "state" / "agentdeck" / "rooms"
    assert folder({"XDG_STATE_HOME": "not/absolute"}) == folder({})
    assert folder() == Path(os.environ["XDG_RUNTIME_DIR"]) / "agentdeck" / "rooms"  # (conftest)


def test_an_entry_is_written_whole_private_and_one_a_room(held: Room) -> None:
    reg = rooms_registry.register(held, kind="run", run_id="r_1", started_at=100.0)
    where = folder()
    assert reg.file == where / entry_name(held.path)
    assert mode(where) == 0o700 and mode(where.parent) == 0o700 and mode(reg.file) == 0o600
    assert json.loads(reg.file.read_text()) == {
        "version": 1, "room": str(held.path), "socket": str(held.socket), "kind": "run",
        "pid": os.getpid(), "started_at": 100.0, "run_id": "r_1"}  # fmt: skip
    assert listing().rooms == [reg] and listing().problems == []
    newer = rooms_registry.register(held, kind="console", run_id="r_2", started_at=200.0)
    assert sorted(p.name for p in where.iterdir()) == [reg.file.name]  # replaced, no temp left
    assert listing().rooms == [newer]
    assert not rooms_registry.unregister(reg)  # the older owner's leaves the newer alone
    assert listing().rooms == [newer]
    assert rooms_registry.unregister(newer) and listing().rooms == []
    assert not rooms_registry.unregister(newer)  # (twice: nothing)


def test_alive_is_the_locks_word_never_the_files(tmp_path: Path) -> None:
    room = Room.at(tmp_path / "room")
    room.create()
    ownership = Ownership(room, "run")
    ownership.acquire()
    reg = rooms_registry.register(room, kind="run")
    assert look(reg).seen == "serving"
    stranger = rooms_registry.register(room, kind="run", pid=os.getpid() + 1)  # not who holds it
    seen = look(stranger)
    assert seen.seen == "other" and f"pid {os.getpid()}" in seen.holder
    ownership.release()  # as the kernel does when its owner dies, even by SIGKILL
    assert look(reg).seen == "gone" and look(stranger).seen == "gone"
    gone = Room.at(tmp_path / "removed")  # a room whose folder is gone
    assert look(rooms_registry.register(gone, kind="run")).seen == "gone"


def test_what_is_not_an_entry_is_said_and_left_alone(held: Room, tmp_path: Path) -> None:
    good = rooms_registry.register(held, kind="run")
    where = folder()
    other = Room.at(tmp_path / "other")

    def named(data: object, room: Path = other.path) -> None:
        (where / entry_name(room)).write_text(json.dumps(data))

    bad = {
        "junk.json": b"{not json", "list.json": b"[1, 2]", "bytes.json": b"\xff\xfe\x00",
        "deep.json": b"[" * 60_000, "huge.json": b" " * (rooms_registry.MAX_ENTRY + 1),
        "notes.txt": b"not an entry's name", "misnamed.json": json.dumps(good.as_json()).encode(),
    }  # fmt: skip
    for name, data in bad.items():
        (where / name).write_bytes(data)
    os.mkfifo(where / "fifo.json")
    (where / "folder.json").mkdir()
    (where / "link.json").symlink_to(good.file)  # type: ignore[arg-type]
    for broken in ({"room": "relative", "socket": "/s", "kind": "run", "pid": 1, "started_at": 1},
                   {"room": str(other.path), "socket": "/s", "kind": "run", "pid": True,
                    "started_at": 1}):  # fmt: skip
        named(broken)
        found = listing()
        assert found.rooms == [good] and len(found.problems) == len(bad) + 4
    named({**good.as_json(), "room": str(other.path), "pid": -1})
    found = listing()
    assert found.rooms == [good]
    assert any("not JSON" in p for p in found.problems) and any(
        "a link" in p for p in found.problems
    )
    assert any("not a file" in p for p in found.problems)
    before = sorted(p.name for p in where.iterdir())
    assert prune() == []  # nothing gone; nothing that is not an entry deleted
    assert sorted(p.name for p in where.iterdir()) == before
    rooms_registry.looked()  # (never raises)


def test_prune_forgets_only_rooms_whose_owner_is_gone(
    held: Room, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = rooms_registry.register(held, kind="run")
    dead = [rooms_registry.register(Room.at(tmp_path / n), kind="run", pid=999_999)
            for n in ("gone-1", "gone-2")]  # fmt: skip
    (folder() / ".x.json.999999.tmp").write_text("{")  # a writer that died mid-write
    assert sorted(r.room.name for r in prune()) == ["gone-1", "gone-2"]
    assert listing().rooms == [live] and sorted(p.name for p in folder().iterdir()) == [
        live.file.name]  # type: ignore[union-attr]  # fmt: skip
    # a new owner registers the room just as it is pruned: its entry is put back
    again = rooms_registry.register(Room.at(tmp_path / "gone-1"), kind="run", pid=999_999)
    real_look = rooms_registry.look

    def racing(reg: rooms_registry.Registration) -> rooms_registry.Looked:
        seen = real_look(reg)
        if reg == again:  # judged gone, then replaced before it is moved aside
            rooms_registry.register(Room(reg.room), kind="console", pid=os.getpid())
        return seen

    monkeypatch.setattr(rooms_registry, "look", racing)
    assert prune() == []
    assert {(r.room.name, r.kind) for r in listing().rooms} == {("room", "run"),
                                                                ("gone-1", "console")}  # fmt: skip
    assert dead[0].file == again.file


def test_a_folder_that_is_not_this_users_is_neither_read_nor_written(tmp_path: Path) -> None:
    where = tmp_path / "reg" / "rooms"
    rooms_registry.ensure(where)
    where.chmod(0o755)  # as something else left it: made private again
    rooms_registry.ensure(where)
    assert mode(where) == 0o700
    if os.geteuid() != 0:
        return
    os.chown(where, NOBODY, NOBODY)
    with pytest.raises(RegistryError, match="belongs to another user"):
        rooms_registry.register(Room.at(tmp_path / "room"), kind="run", where=where)
    found = listing(where)
    assert found.rooms == [] and "belongs to another user" in found.problems[0]


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder every user may pass through (the test's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="agentdeck-registry-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_another_user_reads_nothing_of_the_registry(base: Path) -> None:
    run = base / "run"
    run.mkdir()
    run.chmod(0o755)  # even where the runtime folder itself is open
    where = run / "agentdeck" / "rooms"
    reg = rooms_registry.register(Room.at(base / "room"), kind="run", where=where)
    assert reg.file is not None and mode(reg.file) == 0o600
    for command in (("ls", str(run / "agentdeck")), ("ls", str(where)), ("cat", str(reg.file))):
        done = as_nobody(*command)
        assert done.returncode != 0 and "Permission denied" in done.stderr, command


def test_needs_input_first_is_the_nearest_deadline_then_the_longest_waiting() -> None:
    calls = [  # (call, deadline, since, room)
        ("c1", None, 50.0, "/b"), ("c2", 300.0, 90.0, "/a"), ("c3", None, 10.0, "/a"),
        ("c4", 200.0, 95.0, "/b"), ("c5", None, 10.0, "/a"), ("c6", None, 10.0, "/0"),
    ]  # fmt: skip
    ordered = sorted(calls, key=lambda c: needs_input_first(c[1], c[2], c[3], c[0]))
    assert [c[0] for c in ordered] == ["c4", "c2", "c6", "c3", "c5", "c1"]


def test_a_rooms_label_is_its_name_unless_two_share_it(tmp_path: Path) -> None:
    a, b, c = tmp_path / "x" / "room", tmp_path / "y" / "room", tmp_path / "alpha"
    assert labels([a, b, c]) == {a: shown(a), b: shown(b), c: "alpha"}
