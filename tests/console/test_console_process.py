"""The console as a real process on a real pseudo-terminal: what a closed terminal does,
and what `agentdeck stop` does to a console hosting the room."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from engine.room import Room, owner_of
from tests.wait import PATIENCE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="a Linux pseudo-terminal")


def read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    """What the terminal shows until `needle` is in it or `seconds` passed (a read with a
    deadline: `select` blocks until output comes)."""
    seen, end = b"", time.monotonic() + seconds
    while needle not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


def start_console(room: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`agentdeck` on a new pseudo-terminal (120x36), drawn; returns it and the pty's master.

    It runs in its own session with the pty as controlling terminal, as a terminal emulator
    or tmux starts it: when the terminal closes, the kernel sends it SIGHUP.
    """
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "AGENT_ROOM": str(room)}
    proc = subprocess.Popen([sys.executable, "-m", "console.cli"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, start_new_session=True,
                            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))  # fmt: skip
    os.close(slave)
    drawn = read_until(master, b"offline-rules-1", PATIENCE)
    if b"offline-rules-1" not in drawn:
        proc.kill()
        proc.wait()
        os.close(master)
        raise AssertionError(f"the console never drew its status bar: {drawn[-500:]!r}")
    return proc, master


def run_status(room: Path) -> list[tuple[str]]:
    db = sqlite3.connect(room / "execution.db")
    try:
        return db.execute("SELECT status FROM runs").fetchall()
    finally:
        db.close()


def test_a_hung_up_terminal_ends_the_console_and_releases_the_room(tmp_path: Path) -> None:
    proc, master = start_console(tmp_path / "room")
    try:
        os.close(master)  # the terminal goes away (SIGHUP; writes to it fail from now on)
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert run_status(tmp_path / "room") == [("ended",)]


def test_sigterm_quits_and_gives_the_terminal_back(tmp_path: Path) -> None:
    proc, master = start_console(tmp_path / "room")
    try:
        proc.send_signal(signal.SIGTERM)
        tail = read_until(master, b"\x1b[?1049l", PATIENCE)  # leaves the alternate screen
        assert b"\x1b[?1049l" in tail
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert run_status(tmp_path / "room") == [("ended",)]


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("[model\nprovider = 'openai'\n", "not valid TOML"),
        ("[store]\nsynchronous = 'SOMETIMES'\n", "synchronous"),
    ],
)
def test_a_bad_config_is_one_clear_line_not_a_traceback(
    tmp_path: Path, toml: str, says: str
) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(toml)
    env = {**os.environ, "AGENT_ROOM": str(room)}
    out = subprocess.run([sys.executable, "-m", "console.cli"], env=env, capture_output=True,
                         text=True, timeout=PATIENCE, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith(f"agentdeck: {room / 'agentdeck.toml'}: ") and says in out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert not (room / "execution.db").exists()  # nothing was touched


def stop(room: Path, *args: str) -> tuple[int, subprocess.CompletedProcess[str]]:
    """`agentdeck stop` on `room`: its pid, and how it ended."""
    argv = [sys.executable, "-m", "engine.cli", "--room", str(room), "stop", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=PATIENCE * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.pid, subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_stop_refuses_a_console_hosting_the_room_unless_forced(tmp_path: Path) -> None:
    """Stopping the runtime a console hosts closes the operator's console: `stop` says
    whose it is and refuses (exit 4); `--force` stops it, and the console's terminal says
    why it closed, once the screen is given back (issue 30)."""
    room = tmp_path / "room"
    proc, master = start_console(room)
    try:
        _, refused = stop(room)
        assert refused.returncode == 4, (refused.stdout, refused.stderr)
        assert f"pid {proc.pid}" in refused.stderr and "console" in refused.stderr
        assert "--force" in refused.stderr and "Traceback" not in refused.stderr
        assert proc.poll() is None  # nothing was sent to it: it still hosts the room
        owner = owner_of(Room.at(room))
        assert owner is not None and (owner["pid"], owner["kind"]) == (proc.pid, "console")

        by, forced = stop(room, "--force")
        assert forced.returncode == 0, (forced.stdout, forced.stderr)
        assert f"stopped pid {proc.pid}" in forced.stdout
        why = f"stopped by `agentdeck stop --force` (pid {by})".encode()
        said = read_until(master, why, PATIENCE)
        assert why in said, said[-500:]
        left = said.rfind(b"\x1b[?1049l")  # the alternate screen left, then the reason
        assert -1 < left < said.index(why), said[-500:]
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert run_status(room) == [("ended",)]


def test_the_first_screen_loads_no_api_server_and_no_loops(tmp_path: Path) -> None:
    """The console draws its first full screen (the attached run) with only what it needs:
    FastAPI, uvicorn, Starlette, the channel loops, MCP's SDK and the prices table are not
    loaded until it is drawn; the room's loops and API start after it."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "tests.console.start_child", str(tmp_path / "room")],
                         cwd=root, capture_output=True, text=True, timeout=PATIENCE * 2,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["imported"] == [] and seen["mounted"] == []
    assert seen["first screen"] == []
    served = set(seen["served"])  # loaded afterwards, not dropped: the API does serve
    assert {"fastapi", "uvicorn", "engine.api.app", "engine.loops.server"} <= served
    assert "engine.loops.channels" in served  # the loops started
