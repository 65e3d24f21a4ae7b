"""The console in a real tmux, as operators run it: tmux's default escape-time (500 ms)
holds an Esc back, so deciding must not need one. A message that makes a `shell` call is
typed, and the call is decided from the chat with one key."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.wait import PATIENCE, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]

TMUX = shutil.which("tmux")
if TMUX is None and os.environ.get("AGENTDECK_REQUIRE_TMUX"):
    raise RuntimeError("tmux is required here (scripts/ensure-tmux installs it)")


class Tmux:
    """A tmux server of the test's own (its own socket, no configuration: the defaults)."""

    def __init__(self, tmp: Path) -> None:
        assert TMUX is not None
        self.base = [TMUX, "-S", str(tmp / "tmux.sock"), "-f", "/dev/null"]

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True,
                              timeout=PATIENCE, check=True)  # fmt: skip
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "deck")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "deck", *keys)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if TMUX is None:
        pytest.skip("tmux is not installed (scripts/ensure-tmux)")
    server = Tmux(tmp_path)
    yield server
    subprocess.run([*server.base, "kill-server"], capture_output=True, timeout=PATIENCE)


async def test_a_call_is_decided_from_the_chat_with_one_key_in_tmux(tmux: Tmux, tmp_path: Path):
    room, home = tmp_path / "room", tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", ""),
           "AGENT_ROOM": str(room), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # fmt: skip
    command = " ".join([f"{k}={v}" for k, v in env.items()] + [sys.executable, "-m", "console"])
    tmux.run("new-session", "-d", "-s", "deck", "-x", "160", "-y", "48", f"env -i {command}")
    assert tmux.run("show-options", "-s", "-v", "escape-time").strip() == "500"  # the default
    await until(lambda: "offline-rules-1" in tmux.screen(), "the console is drawn")
    tmux.keys("run `echo tmux-ok`", "Enter")
    await until(lambda: "tab chat" in tmux.screen(), "the card holds the keyboard, keys live",
                seen=tmux.screen)  # fmt: skip
    assert "$ echo tmux-ok" in tmux.screen()
    tmux.keys("a")  # one key, no Esc

    def decisions() -> list[tuple[str, str]]:
        with sqlite3.connect(f"file:{room / 'execution.db'}?mode=ro", uri=True) as db:
            return db.execute("SELECT action, status FROM decisions").fetchall()

    await until(decisions, "the decision is applied", seen=tmux.screen,
                ok=lambda rows: rows == [("resume", "applied")])  # fmt: skip
    await until(lambda: "waits for you" not in tmux.screen(), "the card gives way",
                seen=tmux.screen)  # fmt: skip
    assert "▊  a " not in tmux.screen()  # and the key typed nothing into the chat
