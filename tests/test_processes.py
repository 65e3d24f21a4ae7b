"""One room, many operators, as real processes: `agentdeck start`/`run` own the room and
serve it; `pending`, `decide`, `invoke`, `cancel` and `status` from other processes go
through its API; `stop` ends it cleanly. A one-off `invoke` on a free room starts nothing
but its own turn."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import room_rows
from tests.wait import PATIENCE, until_sync

ROOT = Path(__file__).resolve().parents[1]
TASK = "run `echo from-the-task` and tell me the time\n"


def agentdeck(
    room: Path, *args: str, timeout: float = PATIENCE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.cli", "--room", str(room), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def reap(proc: subprocess.Popen[Any] | None) -> None:
    """Kill `proc` if it still runs, wait for it and close its pipes."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def room_with_task(tmp_path: Path) -> Path:
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    (room / "tasks" / "greet.md").write_text(TASK)
    return room


def waiting_call(room: Path) -> dict[str, Any]:
    def listed() -> list[dict[str, Any]]:
        out = agentdeck(room, "pending", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    calls = until_sync(listed, "the task's shell call waits")
    (call,) = calls
    assert (call["tool"], call["thread_id"]) == ("shell", "task:greet")
    assert call["args"] == {"command": "echo from-the-task"}
    return call


def approve_and_finish(room: Path) -> None:
    call = waiting_call(room)
    out = agentdeck(room, "decide", call["call_id"], "approve", "--json")
    assert out.returncode == 0, out.stderr
    outcome = json.loads(out.stdout)
    assert (outcome["status"], outcome["reason"], outcome["thread_id"]) == (
        "done", "natural", "task:greet")  # fmt: skip
    assert "from-the-task" in outcome["text"]
    # the same decision from a third process: recorded, nothing runs twice, and it says it
    # lost (exit 1, as cancel of an ended turn: issue 25)
    again = agentdeck(room, "decide", call["call_id"], "approve")
    assert again.returncode == 1 and "was already decided (succeeded)" in again.stderr
    assert room_rows(
        room, "SELECT count(*) FROM tool_calls WHERE tool='shell' AND status='succeeded'"
    ) == [(1,)]


def test_start_pending_decide_status_stop(tmp_path: Path) -> None:
    room = room_with_task(tmp_path)
    started = agentdeck(room, "start")
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("agentdeck: started pid ")
    summary = json.loads((room / "agent.run").read_text())
    pid = summary["pid"]
    assert summary["socket"] == str(room / "agent.sock") and summary["kind"] == "start"
    try:
        again = agentdeck(room, "start")
        assert again.returncode == 4 and f"already owned by pid {pid}" in again.stderr
        status = agentdeck(room, "status")
        assert status.returncode == 0 and f"owned by pid {pid} (agentdeck start" in status.stdout
        approve_and_finish(room)
        status = json.loads(agentdeck(room, "status", "--json").stdout)
        assert (status["info"]["pid"], status["pending"], status["running"]) == (pid, 0, 0)
    finally:
        stopped = agentdeck(room, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped pid {pid}" in stopped.stdout
    assert not (room / "agent.sock").exists()
    assert room_rows(room, "SELECT kind, status FROM runs") == [("start", "ended")]
    assert json.loads((room / "agent.run").read_text())["state"] == "stopped"
    log = (room / "agent.log").read_text()
    assert "task:greet" in log and "SIGTERM, stopping" in log
    assert agentdeck(room, "status").returncode == 3  # free again


def test_stop_stops_the_lock_holder_not_the_pid_a_file_names(tmp_path: Path) -> None:
    """`.owner` is a note anyone with the room can rewrite: `stop` signals the process the
    kernel says holds the room's lock (issue 25, item 9)."""
    room = room_with_task(tmp_path)
    bystander = subprocess.Popen(["sleep", "3600"])  # (the process .owner will name)
    try:
        for tamper in ("rewrite", "delete"):
            started = agentdeck(room, "start")
            assert started.returncode == 0, started.stderr
            pid = json.loads((room / "agent.run").read_text())["pid"]
            owner = room / ".owner"
            if tamper == "rewrite":
                owner.write_text(json.dumps({**json.loads(owner.read_text()),
                                             "pid": bystander.pid}))  # fmt: skip
            else:
                owner.unlink()
            stopped = agentdeck(room, "stop")
            assert stopped.returncode == 0, stopped.stderr
            assert f"stopped pid {pid}" in stopped.stdout, (tamper, stopped.stdout)
            assert bystander.poll() is None, f"{tamper}: the bystander was signalled"
            assert agentdeck(room, "status").returncode == 3  # the runtime is gone
    finally:
        reap(bystander)
        agentdeck(room, "stop")


@pytest.fixture
def foreground(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    room = room_with_task(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("agentdeck run ") and f"API on {room / 'agent.sock'}" in first
        yield room, proc
    finally:
        reap(proc)


def test_run_in_the_foreground_is_steered_from_other_processes(foreground) -> None:
    room, proc = foreground
    approve_and_finish(room)
    out = agentdeck(room, "invoke", "--json", "calc 6*7")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["text"] == "`calc` returned: 42"
    # a turn waits; cancel it from here
    out = agentdeck(room, "invoke", "--json", "--thread", "cli:c", "run `rm -rf build`")
    assert out.returncode == 3
    turn_id = json.loads(out.stdout)["turn_id"]
    refused = agentdeck(room, "invoke", "--thread", "cli:c", "calc 1+1")
    assert refused.returncode == 2 and "waiting for a decision" in refused.stderr
    cancelled = agentdeck(room, "cancel", turn_id, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert (json.loads(cancelled.stdout)["status"], json.loads(cancelled.stdout)["reason"]) == (
        "done", "cancelled")  # fmt: skip
    assert agentdeck(room, "cancel", turn_id).returncode == 1  # already ended
    assert agentdeck(room, "cancel", "t_nope").returncode == 2
    assert agentdeck(room, "decide", "c_nope", "approve").returncode == 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=PATIENCE) == 0
    assert not (room / "agent.sock").exists()
    assert room_rows(room, "SELECT kind, status FROM runs") == [("run", "ended")]


def test_a_one_off_invoke_on_a_free_room_starts_nothing_else(tmp_path: Path) -> None:
    """A task an earlier run queued stays queued: the one-off runs its own turn only and
    leaves nothing running (before, it started the task and left it `running`)."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text("[groups.task]\npaused = true\n")
    (room / "tasks").mkdir()
    (room / "tasks" / "later.md").write_text("run `sleep 30`\n")
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("agentdeck run ")
        until_sync(lambda: room_rows(room, "SELECT status FROM turn_requests"),
                   "the task is queued behind its paused group",
                   ok=lambda rows: rows == [("queued",)])  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        reap(proc)
    (room / "agentdeck.toml").write_text("")  # the group is not paused any more
    conn = sqlite3.connect(room / "execution.db")
    conn.execute("UPDATE thread_groups SET paused=0")
    conn.commit()
    conn.close()
    out = agentdeck(room, "invoke", "calc 1+1")
    assert out.returncode == 0 and out.stdout.strip() == "`calc` returned: 2", out.stderr
    assert room_rows(room, "SELECT status FROM turn_requests WHERE thread_id='task:later'") == [
        ("queued",)
    ]
    assert room_rows(room, "SELECT count(*) FROM turns WHERE thread_id='task:later'") == [(0,)]
    assert room_rows(room, "SELECT count(*) FROM turns WHERE status != 'done'") == [(0,)]
    assert not (room / "agent.sock").exists()


def test_commands_on_an_owner_that_serves_no_api_say_so(tmp_path: Path) -> None:
    """An embedding program (a ToolRunner) owns the room and serves nothing: the CLI waits
    for it, then says who holds the room instead of hanging or tracing back."""
    room = tmp_path / "room"
    hold = ("import sys, time; from engine.room import Ownership, Room; "
            "Ownership(Room.at(sys.argv[1]), 'embed').acquire(); print('held', flush=True); "
            "time.sleep(3600)")  # it holds the room until reap() kills it  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", hold, str(room)], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)  # fmt: skip
    try:
        room.mkdir(exist_ok=True)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        import engine.api.connect as connect_module

        env_wait = "import engine.api.connect as c; c.ONE_OFF_WAIT = 1.5; "
        code = env_wait + "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
        out = subprocess.run([sys.executable, "-c", code, "--room", str(room), "pending"],
                             capture_output=True, text=True, cwd=ROOT, timeout=PATIENCE)  # fmt: skip
        assert connect_module.ONE_OFF_WAIT > 1.5  # (the real wait is longer)
        assert out.returncode == 4  # busy: try again, not failed
        assert "agentdeck embed" in out.stderr and "serves no API" in out.stderr
        assert "Traceback" not in out.stderr
    finally:
        reap(holder)


@pytest.mark.parametrize("toml", ["[groups.chat]\npaused = true\n",
                                  "[groups.chat]\nmax_running_turns = 0\n"])  # fmt: skip
@pytest.mark.parametrize("owned", [False, True])
def test_invoke_on_a_held_group_says_it_is_queued_and_why(tmp_path: Path, toml: str,
                                                          owned: bool) -> None:  # fmt: skip
    """Issue 13, item 5: `invoke` hung without a word when its group was paused or had no
    budget. It says the request is queued and why, at once, and goes on waiting."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(toml)
    owner = None
    if owned:
        owner = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 cwd=ROOT)  # fmt: skip
        assert owner.stdout is not None and owner.stdout.readline().startswith("agentdeck run")
    invoke = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "invoke",
                               "calc 1+1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT)  # fmt: skip
    try:
        assert invoke.stderr is not None
        line = invoke.stderr.readline()
        reason = "group chat paused" if "paused" in toml else "group chat budget full (0 of 0"
        assert line.startswith("agentdeck: queued on invoke:default: ") and reason in line, line
        assert invoke.poll() is None  # still waiting for its turn, as asked
    finally:
        for proc in (invoke, owner):
            reap(proc)
    assert room_rows(room, "SELECT status FROM turn_requests") == [("queued",)]  # nothing lost


def test_run_with_an_unread_stdout_keeps_running_turns(tmp_path: Path) -> None:
    """Issue 13, item 3: `run` with a stdout nobody read stalled every turn once ~64 KB of
    log was written (a blocking print on the event loop). Logging never blocks the loop."""
    import anyio

    from engine.api.connect import connect
    from engine.api.models import SubmitBody
    from engine.room import Room
    from tests import wait

    room = tmp_path / "room"
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)  # fmt: skip
    try:
        until_sync(lambda: (room / "agent.sock").exists(), "the API is served")

        async def flood() -> int:
            client = await connect(Room.at(room))
            assert client is not None
            done = 0
            async with client:
                for i in range(60):  # ~3 lines of ~500 bytes a turn: far past 64 KB
                    sub = await client.submit(SubmitBody(thread_id=f"t{i:03d}-" + "x" * 480,
                                                         text="calc 1+1", sender="t"))  # fmt: skip
                    await wait.until(lambda turn=sub.turn_id: client.outcome(turn, wait=5),
                                     f"turn {i} done", ok=lambda out: out.status == "done",
                                     every=0)  # (each look waits up to 5 s for news)  # fmt: skip
                    done += 1
            return done

        assert anyio.run(flood) == 60
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=PATIENCE) == 0  # and it still stops, with its writer blocked
    finally:
        reap(proc)
