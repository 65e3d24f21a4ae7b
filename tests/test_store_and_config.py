"""execution.db (tables, pragmas, atomic writes), agentdeck.toml, room ownership and paths."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.config import Config, ConfigError, load_config
from engine.room import Ownership, Room, RoomBusy, default_room
from engine.store import StoreError, migrations
from engine.store.sqlite import SqliteStore, Store
from tests.helpers import on
from tests.wait import PATIENCE, until

TABLES = {
    "runs",
    "thread_groups",
    "threads",
    "turns",
    "steps",
    "tool_calls",
    "decisions",
    "checkpoints",
    "messages",
    "events",
}

RUN = "INSERT INTO runs (id, kind, pid, started_at, status) VALUES (?, ?, ?, ?, ?)"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await SqliteStore.open(tmp_path / "execution.db")
    try:
        yield s
    finally:
        await s.close()


# --- Store.open ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_open_creates_all_tables(store: Store) -> None:
    rows = await on(store).fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    names = {r["name"] for r in rows}
    assert TABLES <= names
    assert await on(store).scalar("PRAGMA user_version") == migrations.VERSION
    assert await store.integrity_check() == "ok"


@pytest.mark.anyio
async def test_open_twice_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "execution.db"
    s = await SqliteStore.open(path)
    try:
        await s.write([(RUN, ("r1", "run", 1, 1.0, "active"))])
    finally:
        await s.close()
    s = await SqliteStore.open(path)  # the schema is idempotent (IF NOT EXISTS)
    try:
        assert await s.scalar("SELECT id FROM runs") == "r1"
    finally:
        await s.close()


@pytest.mark.anyio
async def test_journal_mode_wal_and_synchronous_full_by_default(store: Store) -> None:
    assert await on(store).scalar("PRAGMA journal_mode") == "wal"
    assert await on(store).scalar("PRAGMA synchronous") == 2  # FULL
    assert await on(store).scalar("PRAGMA foreign_keys") == 1


@pytest.mark.anyio
async def test_synchronous_normal_when_asked(tmp_path: Path) -> None:
    s = await SqliteStore.open(tmp_path / "execution.db", synchronous="NORMAL")
    try:
        assert await s.scalar("PRAGMA synchronous") == 1  # NORMAL
        assert await s.scalar("PRAGMA journal_mode") == "wal"
    finally:
        await s.close()


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["OFF", "full", "EXTRA", "FULL; DROP TABLE runs"])
async def test_synchronous_other_values_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(StoreError, match="synchronous must be FULL or NORMAL"):
        await SqliteStore.open(tmp_path / "execution.db", synchronous=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "execution.db").exists()


@pytest.mark.anyio
async def test_open_unwritable_location_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteStore.open(tmp_path / "missing-dir" / "execution.db")
    await _aiosqlite_workers_gone()


async def _aiosqlite_workers_gone() -> None:
    """aiosqlite stops a connection that failed to open without awaiting the stop; its worker
    thread then posts to the event loop. Let it finish before the test's loop closes, or it
    dies with 'Event loop is closed' (an unhandled thread exception under -W error)."""
    await until(
        lambda: [t.name for t in threading.enumerate()
                 if t.name.endswith("(_connection_worker_thread)") and t.is_alive()],
        "aiosqlite's worker thread stopped",
        ok=lambda alive: not alive,
    )  # fmt: skip


@pytest.mark.anyio
async def test_open_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "execution.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="execution.db"):
        await SqliteStore.open(path)


# --- Store.write ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_commits_a_batch(store: Store) -> None:
    await store.write(
        [
            (RUN, ("r1", "run", 1, 1.0, "active")),
            ("INSERT INTO thread_groups (name) VALUES (?)", ("default",)),
            ("UPDATE runs SET status = ? WHERE id = ?", ("ended", "r1")),
        ]
    )
    # Committed: another connection sees it.
    with sqlite3.connect(store.path) as other:
        assert other.execute("SELECT id, status FROM runs").fetchall() == [("r1", "ended")]
        assert other.execute("SELECT name FROM thread_groups").fetchall() == [("default",)]
    other.close()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "third",
    [
        pytest.param((RUN, ("r1", "run", 3, 3.0, "active")), id="duplicate-key"),
        pytest.param((RUN, ("r3", "run", None, 3.0, "active")), id="not-null"),
        pytest.param(("INSERT INTO nowhere VALUES (?)", (1,)), id="no-such-table"),
        pytest.param((RUN, ("r3", "run")), id="wrong-param-count"),
        pytest.param(
            (
                "INSERT INTO turns (id, thread_id, run_id, origin, sender, text, status, "
                "created_at, updated_at) VALUES ('u', 'no-thread', 'r1', 'invoke', 's', 't', "
                "'running', 0, 0)",
                (),
            ),
            id="foreign-key",
        ),
    ],
)
async def test_write_is_atomic(store: Store, third: tuple[str, tuple]) -> None:
    ops = [
        (RUN, ("r1", "run", 1, 1.0, "active")),
        (RUN, ("r2", "run", 2, 2.0, "active")),
        third,
    ]
    with pytest.raises(StoreError, match="write to execution.db failed"):
        await store.write(ops)
    assert await on(store).scalar("SELECT count(*) FROM runs") == 0
    assert await on(store).scalar("SELECT count(*) FROM turns") == 0
    # The connection is not left inside a transaction: the next checkpoint works.
    await store.write([(RUN, ("r9", "run", 9, 9.0, "active"))])
    with sqlite3.connect(store.path) as other:
        assert other.execute("SELECT id FROM runs").fetchall() == [("r9",)]
    other.close()


@pytest.mark.anyio
async def test_empty_write_is_fine(store: Store) -> None:
    await store.write([])
    assert await on(store).scalar("SELECT count(*) FROM runs") == 0


@pytest.mark.anyio
async def test_bad_read_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="read from execution.db failed"):
        await on(store).fetchall("SELECT * FROM nowhere")
    assert await on(store).fetchone("SELECT * FROM runs") is None
    assert await on(store).scalar("SELECT id FROM runs") is None


# --- config --------------------------------------------------------------------------------


def test_missing_config_means_defaults(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "agentdeck.toml")
    assert cfg == Config()
    assert cfg.store.synchronous == "FULL"
    assert cfg.model.provider is None
    assert cfg.runtime.tool_concurrency == 4
    assert cfg.runtime.max_rounds == 25


def test_empty_config_means_defaults(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_text("")
    assert load_config(path) == Config()


def test_config_values_are_read(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_text(
        textwrap.dedent(
            """
            [store]
            synchronous = "NORMAL"
            [model]
            provider = "offline"
            offline_delay = 0.5
            [runtime]
            tool_concurrency = 8
            shell_timeout = 2
            """
        )
    )
    cfg = load_config(path)
    assert cfg.store.synchronous == "NORMAL"
    assert cfg.model.provider == "offline" and cfg.model.offline_delay == 0.5
    assert cfg.runtime.tool_concurrency == 8 and cfg.runtime.shell_timeout == 2.0
    assert cfg.runtime.max_rounds == 25  # untouched keys keep their defaults


@pytest.mark.parametrize(
    "text",
    [
        "[store\nsynchronous = 1",
        "synchronous = ",
        "a = 'x'\na = 'y'",
        "= 3",
        "a = " + "[" * 5000 + "]" * 5000,  # nested past tomllib's recursion
    ],
)
def test_invalid_toml_names_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert "not valid TOML" in str(info.value)


def test_non_utf8_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_bytes(b'[model]\nmodel = "\xff\xfe"\n')
    with pytest.raises(ConfigError, match="agentdeck.toml"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param("bogus = 1", "[bogus]", id="unknown-top-level"),
        pytest.param("[store]\nfsync = true", "[store.fsync]", id="unknown-in-section"),
        pytest.param("[runtime]\nmax_round = 3", "[runtime.max_round]", id="typo"),
        pytest.param("[runtime]\ntool_concurrency = 'four'", "[runtime.tool_concurrency]", id="wrong-type"),
        pytest.param("[runtime]\ntool_concurrency = 0", "[runtime.tool_concurrency]", id="out-of-range"),
        pytest.param("[store]\nsynchronous = 'OFF'", "[store.synchronous]", id="bad-choice"),
        pytest.param("[model]\nprovider = 'gemini'", "[model.provider]", id="bad-provider"),
        pytest.param("[model]\noffline_delay = 60", "[model.offline_delay]", id="delay-too-long"),
        pytest.param("store = 'FULL'", "[store]", id="section-not-table"),
    ],
)  # fmt: skip
def test_bad_key_names_the_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert key in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


def test_all_problems_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    path.write_text("[store]\nsynchronous = 'OFF'\n[runtime]\nmax_rounds = 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "[store.synchronous]" in str(info.value)
    assert "[runtime.max_rounds]" in str(info.value)


def test_unreadable_config_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    path.mkdir()
    with pytest.raises(ConfigError, match="agentdeck.toml"):
        load_config(path)


# --- ownership -----------------------------------------------------------------------------


@pytest.fixture
def room(tmp_path: Path) -> Room:
    r = Room.at(tmp_path / "room")
    r.ensure()
    return r


def test_flock_is_per_open_file_description(tmp_path: Path) -> None:
    """The premise of the in-process ownership tests: two os.open()s of one file conflict."""
    import fcntl

    path = tmp_path / "lock"
    a = os.open(path, os.O_RDWR | os.O_CREAT)
    b = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(a, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):
            fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(a)
        os.close(b)


def test_second_owner_is_refused_with_the_pid(room: Room) -> None:
    first = Ownership(room, "console")
    first.acquire()
    try:
        holder = json.loads(room.owner_file.read_text())
        assert holder["pid"] == os.getpid() and holder["kind"] == "console"
        second = Ownership(room, "run")
        with pytest.raises(RoomBusy) as info:
            second.acquire()
        text = str(info.value)
        assert f"pid {os.getpid()}" in text
        assert str(room.path) in text
        assert "agentdeck console" in text
        second.release()  # the refused claim holds nothing: releasing it takes nothing
        assert json.loads(room.owner_file.read_text())["kind"] == "console"
        with pytest.raises(RoomBusy, match="agentdeck console"):
            Ownership(room, "decide").acquire()
    finally:
        first.release()


def test_release_lets_another_acquire(room: Room) -> None:
    first = Ownership(room, "console")
    first.acquire()
    first.release()
    assert room.owner_file.read_text() == ""  # no stale owner left behind
    second = Ownership(room, "invoke")
    second.acquire()
    try:
        assert json.loads(room.owner_file.read_text())["kind"] == "invoke"
        with pytest.raises(RoomBusy, match="agentdeck invoke"):
            Ownership(room, "decide").acquire()
    finally:
        second.release()
    second.release()  # releasing twice is harmless


@contextmanager
def owned_elsewhere(room: Room) -> Iterator[subprocess.Popen[str]]:
    """A child process that owns `room` (as `agentdeck run`) until the block ends."""
    code = textwrap.dedent(
        f"""
        import sys
        from engine.room import Ownership, Room
        Ownership(Room.at({str(room.path)!r}), "run").acquire()
        print("ready", flush=True)
        sys.stdin.readline()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=PATIENCE)
        child.stdout.close()  # type: ignore[union-attr]


def test_owner_in_another_process_is_named(room: Room) -> None:
    with owned_elsewhere(room) as child:
        with pytest.raises(RoomBusy, match=f"pid {child.pid} .*agentdeck run"):
            Ownership(room, "console").acquire()
    # The child is gone, so the kernel dropped its lock.
    o = Ownership(room, "console")
    o.acquire()
    o.release()


def test_unreadable_holder_is_another_process(room: Room) -> None:
    import fcntl

    fd = os.open(room.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        room.owner_file.write_text("garbage")
        with pytest.raises(RoomBusy, match="owned by another process"):
            Ownership(room, "run").acquire()
    finally:
        os.close(fd)


def test_removing_the_owner_file_takes_nothing_from_the_owner(room: Room) -> None:
    """Issue 13, item 15: `rm .owner` let a second process take a room its owner still ran
    (two `decide`s then wrote one thread at once). The lock is on the room's directory."""
    with owned_elsewhere(room):
        room.owner_file.unlink()
        with pytest.raises(RoomBusy, match="owned by another process"):
            Ownership(room, "decide").acquire()
        room.owner_file.write_text(json.dumps({"pid": 1, "kind": "fake"}))  # lies change nothing
        with pytest.raises(RoomBusy):
            Ownership(room, "decide").acquire()
        from engine.room import owner_of

        assert owner_of(room) is not None
    o = Ownership(room, "console")
    o.acquire()
    o.release()


# --- Room paths ----------------------------------------------------------------------------


def test_room_paths(tmp_path: Path) -> None:
    r = Room.at(tmp_path)
    assert r.path == tmp_path.resolve()
    assert r.db == r.path / "execution.db"
    assert r.config == r.path / "agentdeck.toml"
    assert r.workspace == r.path / "workspace"
    assert r.summary == r.path / "agent.run"
    assert r.owner_file == r.path / ".owner"
    r.ensure()
    assert r.workspace.is_dir()
    r.write_summary({"turns": 1})
    assert json.loads(r.summary.read_text()) == {"turns": 1}
    assert not r.summary.with_suffix(".run.tmp").exists()


def test_room_at_relative_and_user_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Room.at("rel/room").path == tmp_path.resolve() / "rel" / "room"
    assert Room.at(Path("x")).path == tmp_path.resolve() / "x"
    assert Room.at("~/r").path == Path(os.environ["HOME"]).resolve() / "r"


def test_agent_room_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_ROOM", str(tmp_path / "envroom"))
    assert default_room() == tmp_path / "envroom"
    assert Room.at(None).path == (tmp_path / "envroom").resolve()
    assert Room.at("").path == (tmp_path / "envroom").resolve()
    # An explicit path wins over AGENT_ROOM.
    assert Room.at(tmp_path / "explicit").path == (tmp_path / "explicit").resolve()
    monkeypatch.setenv("AGENT_ROOM", "~/tilde-room")
    assert default_room() == Path(os.environ["HOME"]) / "tilde-room"


def test_default_room_without_agent_room(monkeypatch: pytest.MonkeyPatch) -> None:
    # conftest sets HOME and XDG_DATA_HOME to a temporary home and removes AGENT_ROOM
    xdg = Path(os.environ["XDG_DATA_HOME"])
    assert default_room() == xdg / "agentdeck" / "room"
    assert Room.at(None).path == (xdg / "agentdeck" / "room").resolve()
    monkeypatch.delenv("XDG_DATA_HOME")
    home = Path(os.environ["HOME"])
    assert default_room() == home / ".local" / "share" / "agentdeck" / "room"
    monkeypatch.setenv("AGENT_ROOM", "")  # empty counts as unset
    assert default_room() == home / ".local" / "share" / "agentdeck" / "room"


@pytest.mark.anyio
async def test_the_wal_is_checkpointed_in_the_background(tmp_path: Path) -> None:
    """The writer never checkpoints (wal_autocheckpoint=0): a thread of the store does, so
    the WAL stays bounded however many commits are made."""
    s = await SqliteStore.open(tmp_path / "execution.db")
    wal = tmp_path / "execution.db-wal"
    try:
        assert await s.scalar("PRAGMA wal_autocheckpoint") == 0
        for i in range(4000):  # unchecked, about 16 MB of WAL (a pass every 256 writes
            await s.write([(RUN, (f"r{i}", "run", 1, 1.0, "active"))])  # keeps about 5)
        await until(lambda: wal.stat().st_size, "the checkpoint thread (beside us) shrank the WAL",
                    ok=lambda size: size < 8_000_000)  # fmt: skip
        await s.write([(RUN, ("last", "run", 1, 1.0, "active"))])  # restarts a checkpointed WAL
        assert wal.stat().st_size < 8_000_000
        assert await s.scalar("SELECT count(*) FROM runs") == 4001
    finally:
        await s.close()
    assert not wal.exists()  # the last connection out checkpoints the rest


@pytest.mark.anyio
async def test_agent_run_follows_the_turns_within_a_moment(tmp_path: Path) -> None:
    """agent.run names a waiting turn shortly after it settles (rewrites are coalesced and
    made off the event loop), and says `stopped` once the runtime closes."""
    from engine.domain.messages import Message
    from engine.runtime import Runtime
    from tests.scripted import Reply, ScriptedModel, shell

    room = Room.at(tmp_path / "room")
    model = ScriptedModel(lambda request: Reply(calls=[("shell", {"command": "ls"})]))
    async with Runtime.open(room, kind="test", provider=model, tools=[shell]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="a", text="go"))
        assert out.status == "waiting"
        summary = await until(lambda: json.loads(room.summary.read_text()),
                              "agent.run names the waiting turn",
                              ok=lambda summary: summary["waiting_turns"] == [out.turn_id])  # fmt: skip
        assert summary["state"] == "active"
    assert json.loads(room.summary.read_text())["state"] == "stopped"


def test_sqlite_and_postgresql_are_siblings_behind_one_store() -> None:
    """Issue 28: PgStore subclassed the SQLite store without calling its __init__, with
    `type: ignore`s. Both now implement the one `Store` (engine/store/base.py): every
    operation it leaves to them is their own, and neither is the other's kind."""
    import inspect

    from engine.store import Store
    from engine.store.pg.store import PgStore
    from engine.store.sqlite import SqliteStore

    operations = set(Store.__abstractmethods__)
    assert {"_apply", "_rows", "index", "integrity_check", "statistics"} <= operations
    for sibling in (SqliteStore, PgStore):
        assert sibling.__mro__[1] is Store and not inspect.isabstract(sibling)
        assert operations <= set(vars(sibling)), sibling  # each implements every one itself
        assert "open" in vars(sibling)
    assert not issubclass(PgStore, SqliteStore)
    # each runs its own database's statements (engine/store/sql/; tests/test_sql_catalogue.py)
    assert SqliteStore.__init__ is not PgStore.__init__
