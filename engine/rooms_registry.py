"""The rooms of this machine: every owner that serves a room (a console hosting it,
`agentdeck run`, `agentdeck start`) registers it in one folder of the user's, so that one
console (the rooms overview, `o`) or `agentdeck inbox` finds every room at once.

Where: `$XDG_RUNTIME_DIR/agentdeck/rooms` (the user's runtime folder, which the login
session owns and empties), else `$XDG_STATE_HOME/agentdeck/rooms` (by default
`~/.local/state/agentdeck/rooms`). The folders agentdeck makes there are 0700 and each
entry 0600: another user can neither list the rooms nor read where their sockets are. A
folder that is not this user's (or is a link) is never read or written.

One entry a room (`<hash of the room's path>.json`: its path, socket, the owner's kind,
pid, start and run), written whole (a temporary file renamed into place) when the owner
starts serving; a new owner of the room replaces the last one's. It is removed when the
owner stops serving, before it lets go of the room's lock, so never a newer owner's.

Alive is the lock's word, never the file's: an entry is `serving` while its room's lock
(engine/room.py, an flock the kernel drops when the owner dies, even by SIGKILL) is held
by the pid it names, `gone` as soon as nobody holds it, and `other` while a process that
did not register holds it (a one-off such as `agentdeck invoke`). Gone entries are shown
as such and removed by `prune`. A file here that is not an entry (garbage, a foreign
file, a link, a folder) is reported and left alone: reading never raises and never
deletes what it cannot read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.room import Room, describe, lock_holder, owner_of

MAX_ENTRY = 64 * 1024  # bytes: an entry is a few hundred; anything larger is not one
SUFFIX = ".json"
VERSION = 1
Seen = Literal["serving", "gone", "other"]


class RegistryError(OSError):
    """The registry's folder cannot be made or used (not this user's, a link, read-only)."""


@dataclass(frozen=True)
class Registration:
    """One room as its owner registered it."""

    room: Path  # the room's folder
    socket: Path  # its API (agent.sock)
    kind: str  # console | run | start (the owner's kind)
    pid: int
    started_at: float  # wall time the owner started serving
    run_id: str = ""
    file: Path | None = field(default=None, compare=False)  # the entry it was read from

    def as_json(self) -> dict[str, Any]:
        return {"version": VERSION, "room": str(self.room), "socket": str(self.socket),
                "kind": self.kind, "pid": self.pid, "started_at": self.started_at,
                "run_id": self.run_id}  # fmt: skip


@dataclass(frozen=True)
class Looked:
    """A registration and what its room's lock says now."""

    reg: Registration
    seen: Seen
    holder: str = ""  # `other`: who holds the lock (engine.room.describe's words)


@dataclass
class Listing:
    """What the registry holds: the rooms, and what is there that is not an entry."""

    folder: Path
    rooms: list[Registration] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each, for the operator


def folder(env: Mapping[str, str] | None = None) -> Path:
    """The registry's folder: under XDG_RUNTIME_DIR when it is set to a folder of this
    user's, else under the XDG state folder."""
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        try:
            info = os.stat(runtime)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            return Path(runtime) / "agentdeck" / "rooms"
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agentdeck" / "rooms"


def entry_name(room: Path) -> str:
    """The file name of `room`'s entry: one a room, whoever owns it."""
    return hashlib.sha256(os.fsencode(room)).hexdigest()[:32] + SUFFIX


def _own(path: Path) -> os.stat_result:
    """The folder at `path`, checked: a real folder of this user's, made 0700 if it was
    looser. RegistryError otherwise."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise RegistryError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise RegistryError(f"{path} is not a folder")
    if info.st_uid != os.geteuid():
        raise RegistryError(f"{path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise RegistryError(f"{path} cannot be made private: {exc.strerror}") from None
    return info


def ensure(where: Path | None = None) -> Path:
    """The registry's folder, made if missing (agentdeck/ and rooms/ 0700, the base
    folder's parents as mkdir makes them); RegistryError when it cannot be used."""
    where = where or folder()
    for path in (where.parent, where):
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"{path} cannot be made: {exc.strerror}") from None
        _own(path)
    return where


def register(room: Room, *, kind: str, run_id: str = "", started_at: float | None = None,
             pid: int | None = None, where: Path | None = None) -> Registration:  # fmt: skip
    """Register `room` as served by this process (or `pid`) on its socket; the entry is
    replaced whole, in one step. RegistryError when it cannot be written."""
    reg = Registration(room.path, room.socket, kind, pid or os.getpid(),
                       time.time() if started_at is None else started_at, run_id)  # fmt: skip
    where = ensure(where)
    target = where / entry_name(room.path)
    tmp = where / f".{target.name}.{os.getpid()}.tmp"
    text = json.dumps(reg.as_json(), sort_keys=True) + "\n"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RegistryError(f"{target} cannot be written: {exc.strerror}") from None
    return Registration(reg.room, reg.socket, reg.kind, reg.pid, reg.started_at, reg.run_id,
                        target)  # fmt: skip


def unregister(reg: Registration) -> bool:
    """Remove `reg`'s entry if it is still this one (not a newer owner's); True if it was
    removed. Called by the owner while it holds the room's lock."""
    if reg.file is None:
        return False
    found = _read(reg.file)
    if not isinstance(found, Registration) or found != reg:
        return False
    try:
        reg.file.unlink()
    except OSError:
        return False
    return True


def listing(where: Path | None = None) -> Listing:
    """Every entry of the registry, oldest owner first, and a line for each file there
    that is not one. Never raises: a registry that cannot be read is a problem line."""
    where = where or folder()
    found = Listing(where)
    try:
        _own_read(where)
        names = sorted(os.listdir(where))
    except FileNotFoundError:
        return found
    except (OSError, RegistryError) as exc:
        found.problems.append(f"the rooms' registry cannot be read: {exc}")
        return found
    for name in names:
        if name.startswith("."):  # an entry being written (or a prune's, for a moment)
            continue
        entry = _read(where / name) if name.endswith(SUFFIX) else "not an entry (left alone)"
        if isinstance(entry, Registration):
            found.rooms.append(entry)
        else:
            found.problems.append(f"{where / name}: {entry}")
    found.rooms.sort(key=lambda r: (r.started_at, str(r.room)))
    return found


def _own_read(where: Path) -> None:
    """Read only a folder of this user's (another's could name any socket)."""
    info = where.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise RegistryError(f"{where} is not a folder")
    if info.st_uid != os.geteuid():
        raise RegistryError(f"{where} belongs to another user (uid {info.st_uid})")


def _read(path: Path) -> Registration | str:
    """The entry at `path`, or why it is not one (never raises)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a link (left alone)"
        return f"cannot be read: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a file (left alone)"
        if info.st_uid != os.geteuid():
            return f"belongs to another user (uid {info.st_uid}): left alone"
        if info.st_size > MAX_ENTRY:
            return f"{info.st_size} bytes: not an entry (left alone)"
        raw = os.read(fd, MAX_ENTRY + 1)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "not JSON (left alone)"
    return _entry(data, path)


def _entry(data: object, path: Path) -> Registration | str:
    if not isinstance(data, dict):
        return "not an entry (left alone)"
    room, socket, kind = data.get("room"), data.get("socket"), data.get("kind")
    pid, started, run_id = data.get("pid"), data.get("started_at"), data.get("run_id", "")
    if not (isinstance(room, str) and os.path.isabs(room) and "\0" not in room):
        return "names no room (left alone)"
    if not (isinstance(socket, str) and os.path.isabs(socket) and "\0" not in socket):
        return "names no socket (left alone)"
    if not (isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31):
        return "names no process (left alone)"
    if not (isinstance(started, int | float) and not isinstance(started, bool)):
        return "says no start (left alone)"
    if not isinstance(kind, str) or not isinstance(run_id, str):
        return "names no kind of owner (left alone)"
    if entry_name(Path(room)) != path.name.lstrip(".").partition(SUFFIX)[0] + SUFFIX:
        return "is not where its room's entry would be (left alone)"
    return Registration(Path(room), Path(socket), kind[:40], pid, float(started), run_id[:80],
                        path)  # fmt: skip


def look(reg: Registration) -> Looked:
    """What the room's lock says of `reg` now: held by its pid (`serving`), by nobody
    (`gone`) or by a process that did not register (`other`). Asked as `agentdeck status`
    asks (a shared lock refused while an owner holds the room), then whose it is (the
    kernel's lock table, when it can be read)."""
    room = Room(reg.room)
    owner = owner_of(room)
    if owner is None:
        return Looked(reg, "gone")
    holder = lock_holder(room)
    if holder is not None and holder != reg.pid:
        return Looked(reg, "other", describe({**owner, "pid": holder}))
    return Looked(reg, "serving")


def looked(where: Path | None = None) -> tuple[list[Looked], list[str]]:
    """Every registered room with what its lock says now, and the registry's problems."""
    found = listing(where)
    return [look(reg) for reg in found.rooms], found.problems


def prune(where: Path | None = None) -> list[Registration]:
    """Remove the entries of rooms whose owner is gone (and temporary files their writers
    left); returns those removed. An entry a new owner wrote meanwhile is put back."""
    where = where or folder()
    removed = []
    for reg in listing(where).rooms:
        if reg.file is None or look(reg).seen != "gone":
            continue
        aside = reg.file.with_name(f".{reg.file.name}.{os.getpid()}.prune")
        try:
            os.rename(reg.file, aside)
        except OSError:
            continue
        moved = _read(aside)
        if moved == reg and look(reg).seen == "gone":
            removed.append(reg)
        else:  # replaced meanwhile: the newer entry goes back, unless a newer still is there
            with contextlib.suppress(OSError):
                os.link(aside, reg.file)
        with contextlib.suppress(OSError):
            aside.unlink()
    with contextlib.suppress(OSError):
        for name in os.listdir(where):
            if name.startswith(".") and name.endswith((".tmp", ".prune")) and not _alive(name):
                with contextlib.suppress(OSError):
                    (where / name).unlink()
    return removed


def _alive(name: str) -> bool:
    """Whether the process that made `.NAME.PID.tmp` (or `.prune`) is alive: its file may
    be mid-write, or about to be put back."""
    pid = name.rpartition(".")[0].rpartition(".")[2]
    if not pid.isdigit():
        return True  # not one of ours: left alone
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True
