"""The README as a newcomer follows it: its tour's commands run as written, in order, on a
clean home with the offline model, and each ends as the README says."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.readme_tour import Command, commands, environment, run
from tests.wait import PATIENCE


def test_the_tour_blocks_are_read_as_written() -> None:
    text = (
        "x\n   ```sh tour\n   a one   # exits 3: why\n   # a comment\n   b \\\n     two\n   ```\n"
    )
    assert commands(text) == [Command("a one   # exits 3: why", 3), Command("b two", 0)]
    words = [c.line.split()[1] for c in commands()]
    assert words[0] == "start" and "stop" in words and "decide" in words


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    env = environment(tmp_path)
    room = tmp_path / ".local" / "share" / "agentdeck" / "room"
    said: dict[str, str] = {}
    try:
        for command in commands():
            done = run(command, env, timeout=PATIENCE * 2)
            said[command.line.split()[1]] = done.stdout + done.stderr
            assert (done.returncode, "Traceback" in done.stderr) == (command.exits, False), (
                f"{command.line}\nexit {done.returncode}\n{done.stdout}{done.stderr}"
            )
    finally:
        run(Command("agentdeck stop", 0), env, timeout=PATIENCE * 2)
    assert "room:      ~/.local/share/agentdeck/room" in said["info"]
    assert "tasks:     ~/.local/share/agentdeck/room/tasks/ (0 files)" in said["info"]
    assert "owner:     none" in said["info"]  # stopped: nothing left running
    assert "done" in said["history"] and "waiting" in said["invoke"]
    for name in ("tasks", "chores"):  # made by `start`, private to the owner
        assert stat.S_IMODE((room / name).stat().st_mode) == 0o700
