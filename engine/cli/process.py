"""The runtime in the background: `start`, `stop`, and `status` (who owns the room).

`start` runs `agentdeck run` (engine/cli/running.py) detached, its output appended to the
room's agent.log, and returns once the new runtime answers on its socket.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from typing import Any

from engine.api.sockets import answers
from engine.cli.common import EXIT_BUSY, EXIT_OK, EXIT_OTHER, EXIT_WAITING
from engine.domain.usage import spent_text
from engine.room import Room, RoomError, ask_to_stop, describe, lock_holder, owner_of, shown

START_WAIT = 30.0  # seconds a background runtime may take to answer on its socket
LOG_KEEP = 10 * 1024 * 1024  # bytes of agent.log before it is rotated to agent.log.1


def start(room: Room) -> int:
    """Start `run` in the background; return once it serves (or say why it did not)."""
    from engine.config import load_config

    room.create()
    if (owner := owner_of(room)) is not None:
        print(f"agentdeck: room {room.path} is already owned by {describe(owner)}",
              file=sys.stderr)  # fmt: skip
        return EXIT_BUSY
    load_config(room.config)  # a bad agentdeck.toml is said here, not only in the log
    _rotate(room)
    try:
        log_fd = os.open(room.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:  # a read-only room, a full disk: the runtime could not run here
        raise RoomError(f"room {room.path} cannot be written: {exc.strerror}") from None
    offset = os.fstat(log_fd).st_size
    try:
        argv = [sys.executable, "-m", "engine.cli", "--room", str(room.path), "run", "--detached"]
        pid = os.posix_spawn(sys.executable, argv, dict(os.environ), setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ])  # fmt: skip
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print(f"agentdeck: the runtime did not start (exit {os.waitstatus_to_exitcode(status)})"
                  f"; {room.log} says:\n{_tail(room, offset)}", file=sys.stderr)  # fmt: skip
            return EXIT_OTHER
        summary = _summary(room)
        if summary.get("pid") == pid and summary.get("socket") and answers(room.socket):
            print(f"agentdeck: started pid {pid} on {shown(room.path)} "
                  f"(run {summary.get('run_id')}); API on {room.socket.name}, "
                  f"log {room.log.name} in the room")  # fmt: skip
            return EXIT_OK
        time.sleep(0.05)
    print(f"agentdeck: pid {pid} did not answer on {room.socket} within {START_WAIT:.0f} s; "
          f"see {room.log}", file=sys.stderr)  # fmt: skip
    return EXIT_OTHER


def stop(room: Room, timeout: float, force: bool = False) -> int:
    """SIGTERM to the owner, then wait until the room is free. A console hosting the room
    is the operator's screen as well as the runtime: it is stopped only when `force`d."""

    owner = owner_of(room)
    if owner is None:
        print(f"agentdeck: nothing runs on {room.path}", file=sys.stderr)
        return EXIT_OK
    pid = lock_holder(room)  # the kernel's word: `.owner` is only a note anyone can rewrite
    if pid is None:
        print(f"agentdeck: room {room.path} is owned by {describe(owner)}, and which process "
              "holds it cannot be told here (no lock of it in /proc/locks: another host, or "
              "another kernel); stop it where it runs", file=sys.stderr)  # fmt: skip
        return EXIT_OTHER
    owner = {**owner, "pid": pid, "kind": _kind(room, owner, pid)}
    if owner["kind"] == "console" and not force:
        print(f"agentdeck: room {shown(room.path)} is hosted by a console, {describe(owner)}: "
              "stopping its runtime closes that console under its operator; quit it there "
              "(`q`), or `agentdeck stop --force`", file=sys.stderr)  # fmt: skip
        return EXIT_BUSY
    try:
        # the owner reads it when the signal comes (a console says it once it has closed)
        ask_to_stop(room, pid, "agentdeck stop --force" if force else "agentdeck stop")
    except OSError:
        pass  # a room it cannot write: the owner stops all the same, without saying who
    try:
        return _stop(room, owner, timeout)
    finally:
        with contextlib.suppress(OSError):
            room.stop_note.unlink()


def _stop(room: Room, owner: dict[str, Any], timeout: float) -> int:
    pid = owner["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended meanwhile
    deadline = time.monotonic() + timeout
    while owner_of(room) is not None:
        if time.monotonic() > deadline:
            print(f"agentdeck: {describe(owner)} did not stop within {timeout:.0f} s "
                  f"(`kill -9 {pid}` ends it; the next start repairs what it left)",
                  file=sys.stderr)  # fmt: skip
            return EXIT_OTHER
        time.sleep(0.05)
    print(f"agentdeck: stopped {describe(owner)}")
    return EXIT_OK


def _kind(room: Room, owner: dict[str, Any], pid: int) -> str:
    """What kind of owner the lock's holder is (console, run, start, a one-off), as the
    first of its notes that names that pid says (`.owner`, then agent.run)."""
    for note in (owner, _summary(room)):
        if note.get("pid") == pid and isinstance(note.get("kind"), str):
            return str(note["kind"])
    return "unknown"


def status_now(room: Room, args: argparse.Namespace) -> int | None:
    """The quick path (engine/cli/light.py): a runtime serving the room answers off its
    socket; None for anything else (the full way says who holds the room, or waits)."""
    from engine.cli.light import owner_json

    room.check()
    owner = owner_of(room)
    if owner is None:
        return None
    answers = [owner_json(room, name) for name in ("info", "statistics", "pending", "cluster")]
    info, stats, waiting_calls, workers = answers
    if info is None or stats is None or waiting_calls is None:
        return None
    return _status(room, args, owner, info, stats, waiting_calls, workers)


async def status(room: Room, args: argparse.Namespace) -> int:
    """Exit 0 when a runtime serves the room, 3 when nobody owns it, 4 when its owner
    does not answer; 2 (RoomError) when there is no room folder at the path."""
    from engine.api.client import OwnerGone
    from engine.api.connect import connect

    room.check()
    owner = owner_of(room)
    if owner is None:
        if args.json:
            print(json.dumps({"room": str(room.path), "owner": None}))
        else:
            print(f"room {shown(room.path)}: free (no runtime; `agentdeck start` runs one)")
        return EXIT_WAITING
    try:
        client = await connect(room, wait=2.0)
    except OwnerGone as exc:
        print(f"agentdeck: {exc}", file=sys.stderr)
        return EXIT_BUSY
    if client is None:  # it stopped meanwhile
        return await status(room, args)
    async with client:
        info = client.owner or await client.info()  # (connect asked it)
        stats = await client.statistics()
        waiting_calls = await client.pending()
        workers = await client.cluster()  # several workers serve the room
    return _status(room, args, owner, info.model_dump(mode="json"), dataclasses.asdict(stats),
                   [c.model_dump(mode="json") for c in waiting_calls],
                   dataclasses.asdict(workers) if workers is not None else None)  # fmt: skip


def _status(room: Room, args: argparse.Namespace, owner: dict[str, Any], info: dict[str, Any],
            stats: dict[str, Any], waiting_calls: list[Any],
            workers: dict[str, Any] | None) -> int:  # fmt: skip
    """Print the owner's status (the API's JSON of info, statistics, pending, cluster)."""
    from engine.cli.workers import as_json, from_json
    from engine.cli.workers import lines as cluster_lines
    from engine.domain.usage import Usage

    threads, groups = stats["threads"], stats["groups"]
    waiting = sum(1 for t in threads if t["state"] == "waiting")
    running, queued = stats["running"], len(stats["queued"])
    view = from_json(workers) if workers is not None else None
    if view is not None:  # the threads are the whole cluster's; the queue is this worker's
        running = sum(1 for t in threads if t["state"] == "running")
        queued = sum(t["queued"] for t in threads)
    held_why = [why for why in (stats.get("held"), *(g.get("held") for g in groups)) if why]
    today = Usage(**stats["today"]) if stats.get("today") is not None else None
    if args.json:
        print(json.dumps({
            "room": str(room.path), "owner": owner, "info": info,
            "running": running, "waiting": waiting, "queued": queued,
            "pending": len(waiting_calls),
            "paused": [g["name"] for g in groups if g["paused"]],
            "held": held_why,
            **({"today": dataclasses.asdict(today)} if today is not None else {}),
            **({"cluster": as_json(view)} if view is not None else {}),
        }))  # fmt: skip
        return EXIT_OK
    print(f"room {shown(room.path)}: owned by {describe(owner)}")
    print(f"run {info['run_id']}, model {info['model']}, up {_duration(info['uptime'])}; "
          f"API on {room.socket.name}")  # fmt: skip
    print(f"{running} running, {waiting} waiting, {queued} queued; "
          f"{len(waiting_calls)} call{'s' if len(waiting_calls) != 1 else ''} "
          "waiting for a decision (`agentdeck pending`)")  # fmt: skip
    if today is not None:
        print(f"today (UTC): {spent_text(today)} (`agentdeck usage`)")
    held = [f"{g['name']} paused" if g["paused"] else f"{g['name']} has no budget (0 running turns)"
            for g in groups if g["paused"] or g["max_running_turns"] == 0]  # fmt: skip
    held += held_why
    if held:
        print(f"held: {'; '.join(held)}: their requests wait until that changes"
              + (" (`agentdeck budget`)" if held_why else ""))  # fmt: skip
    if view is not None:
        print("\n".join(cluster_lines(view)))
    return EXIT_OK


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _summary(room: Room) -> dict[str, object]:
    try:
        data = json.loads(room.summary.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rotate(room: Room) -> None:
    try:
        if room.log.stat().st_size > LOG_KEEP:
            os.replace(room.log, room.log.with_name("agent.log.1"))
    except OSError:
        pass


def _tail(room: Room, offset: int, lines: int = 20) -> str:
    try:
        with open(room.log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(nothing)"
    return "\n".join(text.splitlines()[-lines:]) or "(nothing)"
