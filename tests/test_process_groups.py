"""The shell tool's process groups: recorded durably before the command runs, found alive
or gone from that record, and ended only when they are the recorded ones
(engine/tools/orphans.py, engine/tools/builtin.py `shell`)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.domain.decisions import Decision
from engine.tools import ToolContext, orphans
from engine.tools import builtin as bt
from tests.helpers import msg, rows, runtime
from tests.scripted import first_then
from tests.wait import PATIENCE, until, until_sync

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


Groups = list[subprocess.Popen[bytes]]


@pytest.fixture
def groups() -> Iterator[Groups]:
    """Process groups a test starts; whatever is left of them is killed at its end."""
    started: Groups = []
    yield started
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=PATIENCE)


def session(command: str, groups: Groups) -> subprocess.Popen[bytes]:
    """`command` in a session (and process group) of its own, as the shell tool starts one."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True)
    groups.append(proc)
    return proc


async def test_shell_records_its_process_group_before_the_command_runs(tmp_path: Path) -> None:
    seen: list[tuple[dict[str, Any], bool, bool]] = []

    async def started(facts: dict[str, Any]) -> None:
        seen.append((facts, (tmp_path / "ran").exists(), orphans.alive(facts)))

    ctx = ToolContext(workspace=tmp_path, started=started)
    result = await bt.shell.call({"command": "touch ran; echo $$"}, ctx)
    assert result.status == "success"
    [(facts, ran_before, alive_then)] = seen
    assert not ran_before, "the command ran before its group was recorded"
    assert alive_then
    assert facts["pgid"] == int(result.content["stdout"])  # `exec` kept the recorded pid
    assert facts["command"] == "touch ran; echo $$"
    if Path("/proc/self/stat").exists():
        assert facts["boot_id"] and isinstance(facts["leader_start"], int)
    assert not orphans.alive(facts)  # ended with its call


async def test_a_command_whose_group_could_not_be_recorded_never_runs(tmp_path: Path) -> None:
    pgids: list[int] = []

    async def started(facts: dict[str, Any]) -> None:
        pgids.append(facts["pgid"])
        raise OSError("disk full")

    ctx = ToolContext(workspace=tmp_path, started=started)
    result = await bt.shell.call({"command": "touch ran"}, ctx)
    assert result.status == "error" and "disk full" in result.message
    assert not (tmp_path / "ran").exists()
    assert not orphans.alive({"pgid": pgids[0]})


def test_a_gate_left_without_its_line_ends_unrun(tmp_path: Path) -> None:
    # what a runtime that died between the spawn and the record leaves: its end of the
    # pipe closes, the gate reads end of file, and the command never starts
    done = subprocess.run(["/bin/sh", "-c", bt._GATE, "agentdeck-shell", "touch ran"],
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=PATIENCE)  # fmt: skip
    assert done.returncode == 125
    assert not (tmp_path / "ran").exists()


async def test_a_turns_shell_call_has_its_group_in_the_calls_meta(tmp_path: Path) -> None:
    script = first_then([("shell", {"command": "echo $$"})])
    async with runtime(tmp_path, script, bt.builtin_tools()) as rt:
        out = await rt.run_turn(msg("go"))
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        [(meta, result)] = await rows(rt, "SELECT meta, result FROM tool_calls")
    process = json.loads(meta)["process"]
    assert process["pgid"] == int(json.loads(result)["stdout"])
    assert process["command"] == "echo $$"
    assert process["run_id"] == rt.run_id and process["at"] > 0


async def test_a_live_group_is_found_and_ended_with_sigterm(groups: Groups) -> None:
    proc = session("sleep 60 & sleep 60 & wait", groups)
    record = {"pgid": proc.pid, **orphans.identity(proc.pid)}
    assert orphans.alive(record)
    assert await orphans.end(record, grace=PATIENCE) == "terminated"  # (however slow to end)
    assert not orphans.alive(record)
    proc.wait(timeout=PATIENCE)
    assert await orphans.end(record) == "gone"


async def test_a_group_that_ignores_sigterm_is_killed(
    groups: Groups, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trapped = tmp_path / "trapped"
    proc = session(
        f"trap '' TERM; : > {shlex.quote(str(trapped))}; sleep 60 & wait; sleep 60", groups
    )
    record = {"pgid": proc.pid, **orphans.identity(proc.pid)}
    await until(trapped.exists, "the trap is set")
    monkeypatch.setattr(orphans, "KILL_WAIT", PATIENCE)  # however slow the kill is to show
    assert await orphans.end(record, grace=0.3) in ("killed", "terminated")
    assert not orphans.alive(record)
    proc.wait(timeout=PATIENCE)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_a_group_whose_leader_left_is_still_found(groups: Groups) -> None:
    # the leader exits at once; its child keeps the group (and its number) alive
    proc = session("sleep 60 >/dev/null 2>&1 & exit 0", groups)
    record = {"pgid": proc.pid, **orphans.identity(proc.pid)}
    proc.wait(timeout=PATIENCE)
    assert orphans.alive(record)
    assert await orphans.end(record, grace=PATIENCE) == "terminated"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_a_group_that_is_not_the_recorded_one_is_left_alone(groups: Groups) -> None:
    proc = session("sleep 60", groups)
    ours = orphans.identity(proc.pid)
    other_leader = {"pgid": proc.pid, "boot_id": ours["boot_id"],
                    "leader_start": ours["leader_start"] + 1}  # fmt: skip
    other_boot = {"pgid": proc.pid, "boot_id": "another-boot", "leader_start": 0}
    for record in (other_leader, other_boot):
        assert not orphans.alive(record)
        assert await orphans.end(record) == "gone"
    assert orphans.alive({"pgid": proc.pid, **ours})  # untouched


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_zombie_group_is_not_alive(groups: Groups) -> None:
    # a child that ended and that this process has not waited for yet: a zombie
    proc = session("exit 0", groups)
    until_sync(lambda: Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0],
               "the child ends (a zombie)", ok=lambda state: state == "Z", every=0.01)  # fmt: skip
    assert not orphans.alive({"pgid": proc.pid})
    proc.wait(timeout=PATIENCE)
