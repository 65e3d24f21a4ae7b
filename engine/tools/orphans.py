"""Process groups a tool started, as recorded, and what became of them after a crash.

The shell tool starts each command in a process group of its own and records it in its
call's meta (`process`: pgid, command, run, when) before the command may run. When the
runtime dies, the group lives on; the next runtime finds it from that record and can end
it. A group is this room's only while it can be told apart from one that took its number
later: on Linux the record also holds the boot and the leader's start time (from /proc),
and a group counts as alive only when one of its processes is not a zombie and either
its leader is the recorded one or its leader is gone (a number still in use as a group's
id is not given to a new process). Elsewhere, `os.killpg(pgid, 0)` is all there is.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio

from engine.domain.review import Ended

PROC = Path("/proc")
BOOT_ID = PROC / "sys/kernel/random/boot_id"
TERM_GRACE = 3.0  # seconds a group gets to end after SIGTERM, before SIGKILL
KILL_WAIT = 2.0  # seconds to wait for the group to be gone after SIGKILL
POLL = 0.05


def _boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """A process's state letter, process group and start time (clock ticks after boot)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name, in parentheses, may hold anything
    try:
        return fields[0], int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def identity(pid: int) -> dict[str, Any]:
    """What tells the group `pid` leads apart from a later one with its number (Linux)."""
    found = _stat(pid)
    if found is None:
        return {}
    return {"boot_id": _boot_id(), "leader_start": found[2]}


def members(pgid: int) -> list[int] | None:
    """The live (not zombie) processes of group `pgid`; None where /proc cannot say."""
    if not PROC.is_dir() or not (PROC / "self").exists():
        return None
    found = []
    with suppress(OSError):
        for entry in PROC.iterdir():
            if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
                if st[1] == pgid and st[0] not in ("Z", "X"):
                    found.append(int(entry.name))
    return found


def alive(record: dict[str, Any]) -> bool:
    """Whether the recorded group still has a live process, and is the recorded one."""
    pgid = record.get("pgid")
    if not isinstance(pgid, int) or pgid <= 1:
        return False
    boot = record.get("boot_id")
    if boot is not None and boot != _boot_id():
        return False  # the machine restarted since: nothing of it is left
    found = members(pgid)
    if found is None:  # no /proc: the group's existence is all we can learn
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return False  # someone else's group: never ours
        return True
    if not found:
        return False
    if pgid in found:  # its leader runs: the recorded one, or a later process with its number
        start = record.get("leader_start")
        leader = _stat(pgid)
        return start is None or (leader is not None and leader[2] == start)
    return True  # the leader ended, its group lives on: the number cannot have been reused


async def _gone(record: dict[str, Any], wait: float) -> bool:
    """Whether the group is gone within `wait` seconds (polled: there is nothing to wait on)."""
    for _ in range(max(1, round(wait / POLL))):
        if not alive(record):
            return True
        await anyio.sleep(POLL)
    return not alive(record)


async def end(record: dict[str, Any], grace: float = TERM_GRACE) -> Ended:
    """End the recorded group if it is alive: SIGTERM, then SIGKILL after `grace` seconds.
    Says `gone` (nothing to end), `terminated`, `killed` or `survived`."""
    if not alive(record):
        return "gone"
    pgid = int(record["pgid"])
    steps: tuple[tuple[signal.Signals, float, Ended], ...] = (
        (signal.SIGTERM, grace, "terminated"), (signal.SIGKILL, KILL_WAIT, "killed"),
    )  # fmt: skip
    for sig, wait, word in steps:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return word
        except PermissionError:
            return "survived"
        if await _gone(record, wait):
            return word
    return "survived"
