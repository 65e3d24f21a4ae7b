"""The agent room on disk: where its files live, and who owns it.

A room is owned by one runtime process at a time (an exclusive `flock` on `.owner`, which
the kernel releases when the process dies, even by SIGKILL). Reading history never needs
ownership.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_TRIES = 5  # tries 10 ms apart before another owner is taken for real


class RoomBusy(RuntimeError):
    """Another process owns the room; the text names it."""


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
        return cls(Path(path).expanduser().resolve() if path else default_room().resolve())

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

    def ensure(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace agent.run atomically with a small JSON summary of what runs now."""
        tmp = self.summary.with_suffix(".run.tmp")
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.summary)


def owner_of(room: Room) -> dict[str, Any] | None:
    """Who owns the room now (`pid host kind since`), or None when nobody does.

    Asked of the lock itself, not of a file a crash may have left behind: a shared lock
    is refused exactly while an owner holds the exclusive one.
    """
    try:
        fd = os.open(room.owner_file, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 4096).decode(errors="replace").strip()
            try:
                info = json.loads(text)
            except ValueError:
                info = None
            return info if isinstance(info, dict) else {"pid": None, "kind": "unknown"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class Ownership:
    """The exclusive claim of one process on a room."""

    def __init__(self, room: Room, kind: str) -> None:
        self.room, self.kind = room, kind
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.room.owner_file, os.O_RDWR | os.O_CREAT, 0o644)
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
            holder = os.read(fd, 4096).decode(errors="replace").strip()
            os.close(fd)
            try:
                info = json.loads(holder)
                who = f"pid {info['pid']} on {info['host']} (agentdeck {info['kind']}, since {info['since']})"
            except (ValueError, KeyError):
                who = "another process"
            raise RoomBusy(f"room {self.room.path} is owned by {who}") from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "kind": self.kind, "since": stamp}
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
