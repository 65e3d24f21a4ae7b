"""The agent room on disk: where its files live, and who owns it.

A room is owned by one runtime process at a time (an exclusive `flock` on the room's
directory, which the kernel releases when the process dies, even by SIGKILL); `.owner`
says who holds it. Reading history never needs ownership.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_TRIES = 5  # tries 10 ms apart before another owner is taken for real
# What a room holds that only its owner may read (Room.tighten), relative to the room.
PRIVATE_FOLDERS = ("workspace", "bus", "poll", "tasks", "chores")
LOOP_FOLDERS = ("tasks", "chores")  # what the pulse loop watches; made by whoever runs it
PRIVATE_FILES = ("execution.db", "execution.db-wal", "execution.db-shm", "agent.log",
                 "agent.run", ".owner", "agentdeck.toml", "channels.toml", "hooks.toml",
                 "server.token", "pulse.json", "will.md", "bus/events.db", "bus/events.db-wal",
                 "bus/events.db-shm", ".stop")  # fmt: skip


class RoomBusy(RuntimeError):
    """Another process owns the room; the text names it."""


class RoomError(ValueError):
    """The room's folder cannot be used (not a directory, not readable or writable)."""


def shown(path: Path) -> str:
    """`path` as an operator reads it: under the home folder, with `~`."""
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except (ValueError, RuntimeError):  # not under it, or no home folder known
        return str(path)


def default_room() -> Path:
    """`AGENT_ROOM`, else a per-user room under the XDG data directory."""
    if env := os.environ.get("AGENT_ROOM"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "agentdeck" / "room"


@dataclass(frozen=True)
class Room:
    """Paths of one agent room."""

    path: Path

    @classmethod
    def at(cls, path: Path | str | None) -> Room:
        """The room at `path` (default: `default_room`); RoomError for a path no folder
        can have (a name past the system's limits)."""
        where = Path(path).expanduser() if path else default_room()
        if len(os.fsencode(where)) >= 4096 or any(len(os.fsencode(p)) > 255 for p in where.parts):
            raise RoomError(f"room {str(where)[:60]}…: the path is too long for a folder")
        try:
            return cls(where.resolve())
        except OSError as exc:
            raise RoomError(f"room {str(where)[:200]}: {exc.strerror}") from None

    def check(self) -> None:
        """RoomError when there is no room folder at the path (nothing, or not a folder)."""
        if not self.path.exists():
            raise RoomError(f"no room at {self.path}")
        if not self.path.is_dir():
            raise RoomError(f"room {self.path} is not a directory")

    @property
    def db(self) -> Path:
        return self.path / "execution.db"

    @property
    def config(self) -> Path:
        return self.path / "agentdeck.toml"

    @property
    def workspace(self) -> Path:
        return self.path / "workspace"

    @property
    def summary(self) -> Path:
        return self.path / "agent.run"

    @property
    def owner_file(self) -> Path:
        return self.path / ".owner"

    @property
    def stop_note(self) -> Path:
        """Who asked the owner to stop (`agentdeck stop`), for the owner to say: written
        before the signal, removed once the room is free."""
        return self.path / ".stop"

    @property
    def socket(self) -> Path:
        """The room's API (the server loop), on a Unix domain socket, mode 0600."""
        return self.path / "agent.sock"

    @property
    def token(self) -> Path:
        """The bearer token TCP requests need (made when `[server] listen` is set), 0600."""
        return self.path / "server.token"

    @property
    def log(self) -> Path:
        """What a background runtime (`agentdeck start`) writes."""
        return self.path / "agent.log"

    def create(self) -> None:
        """Make the room's folder if it is missing (private to its owner); RoomError saying
        why it cannot be used."""
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise RoomError(f"room {self.path} is not a directory") from None
        except OSError as exc:
            raise RoomError(f"room {self.path} cannot be made: {exc.strerror}") from None

    def tighten(self) -> list[str]:
        """Make the room private to its owner: its folders 0700, the files agentdeck
        writes 0600 (the conversation, the tool arguments and results are in them). Returns
        the names that other users could read, for a notice."""
        opened = []
        for path in (self.path, *(self.path / d for d in PRIVATE_FOLDERS),
                     *(self.path / f for f in PRIVATE_FILES)):  # fmt: skip
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode) or not mode & 0o077:
                continue
            with contextlib.suppress(OSError):
                os.chmod(path, stat.S_IMODE(mode) & 0o700)
                opened.append(path.name if path != self.path else "the room's folder")
        return opened

    def check_writable(self) -> None:
        """RoomError unless a file can be made in the room (a read-only filesystem, a
        folder another user owns)."""
        try:
            import tempfile

            with tempfile.TemporaryFile(dir=self.path):
                pass
        except OSError as exc:
            raise RoomError(f"room {self.path} cannot be written: {exc.strerror}") from None

    def ensure(self) -> None:
        try:
            self.workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RoomError(f"room {self.path}: no workspace: {exc.strerror}") from None

    def make_loop_folders(self) -> list[str]:
        """Make the folders the pulse loop watches (`tasks/`, `chores/`), private to the
        owner, so that dropping a file in needs no mkdir; returns what could not be made,
        with why (the loop then watches a folder that is not there yet, as before)."""
        failed = []
        for name in LOOP_FOLDERS:
            try:
                (self.path / name).mkdir(mode=0o700, exist_ok=True)
            except OSError as exc:
                failed.append(f"{name}/: {exc.strerror}")
        return failed

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace agent.run atomically with a small JSON summary of what runs now."""
        _write(self.summary, json.dumps(summary, indent=2, sort_keys=True) + "\n")


def describe(owner: dict[str, Any]) -> str:
    """`pid 12 (agentdeck run, since 2026-11-26T10:00:00)`."""
    since = f", since {owner['since']}" if owner.get("since") else ""
    return f"pid {owner.get('pid')} (agentdeck {owner.get('kind', 'unknown')}{since})"


SERVING = ("console", "run", "start")  # the kinds of owner that serve the room's API


def owner_of(room: Room) -> dict[str, Any] | None:
    """Who owns the room now (`pid host kind since`), or None when nobody does.

    Asked of the lock itself, not of a file a crash may have left behind: a shared lock
    on the room's directory is refused exactly while an owner holds the exclusive one.
    """
    try:
        fd = os.open(room.path, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(room)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def lock_holder(room: Room, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid of the process holding the room's lock, as the kernel says (Linux's
    /proc/locks), never as a file in the room says: None when nobody holds it or it cannot
    be told."""
    try:
        info = room.path.stat()
        table = locks.read_text()
    except OSError:
        return None
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in table.splitlines():  # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:5678 0 EOF"
        fields = line.split()
        if "->" in fields:  # a waiter, not the holder
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            return int(fields[4]) if fields[4].isdigit() else None
    return None


def ask_to_stop(room: Room, owner: int, by: str) -> None:
    """Note that this process (running the command `by`) is about to stop the owner, pid
    `owner`, so that it can say who stopped it."""
    _write(room.stop_note, json.dumps({"owner": owner, "by": by, "pid": os.getpid()}))


def stop_asked(room: Room) -> dict[str, Any] | None:
    """Who asked this process to stop (`by`: the command, `pid`: its process), as the
    stopper's note says, when the note names this process as the owner it stops."""
    try:
        note = json.loads(room.stop_note.read_text(errors="replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or note.get("owner") != os.getpid():
        return None
    return note


def _holder(room: Room) -> dict[str, Any]:
    """What the owner wrote about itself in `.owner` (a name: it may be gone or garbled)."""
    try:
        info = json.loads(room.owner_file.read_text(errors="replace"))
    except (OSError, ValueError):
        info = None
    return info if isinstance(info, dict) else {"pid": None, "kind": "unknown"}


class Ownership:
    """The exclusive claim of one process on a room.

    The lock is an exclusive `flock` on the room's directory itself, which nothing can
    unlink or replace under the owner while the room has its files: removing or
    rewriting `.owner` (only what the owner says about itself) takes nothing from it. The
    kernel drops the lock when the process dies, even by SIGKILL.
    """

    def __init__(self, room: Room, kind: str) -> None:
        self.room, self.kind = room, kind
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.room.path, os.O_RDONLY | os.O_DIRECTORY)
        except NotADirectoryError:
            raise RoomError(f"room {self.room.path} is not a directory") from None
        except OSError as exc:
            raise RoomError(f"room {self.room.path} cannot be opened: {exc.strerror}") from None
        try:
            for attempt in range(PROBE_TRIES):  # a client's `owner_of` holds it a moment
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == PROBE_TRIES - 1:
                        raise
                    time.sleep(0.01)
        except BlockingIOError:
            os.close(fd)
            info = _holder(self.room)
            try:
                who = (f"pid {info['pid']} on {info['host']} (agentdeck {info['kind']}, "
                       f"since {info['since']})")  # fmt: skip
            except KeyError:
                who = "another process"
            raise RoomBusy(f"room {self.room.path} is owned by {who}") from None
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        import socket

        info = {"pid": os.getpid(), "host": socket.gethostname(), "kind": self.kind, "since": stamp}
        try:
            _write(self.room.owner_file, json.dumps(info))
        except OSError as exc:
            os.close(fd)
            raise RoomError(f"room {self.room.path} cannot be written: {exc.strerror}") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                _write(self.room.owner_file, "")  # no stale owner left behind
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _write(path: Path, text: str) -> None:
    """Replace `path`'s content in one step (a reader sees the old or the new, whole), with
    a file only its owner reads."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
