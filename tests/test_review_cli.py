"""`agentdeck review`, `review kill` and `decide CALL fail|rerun` on a room a crash left with
a `shell` call whose outcome is unknown and whose process group survived: through the
room's owner (`agentdeck run`) and opening the room itself, with the same output and
exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from engine.tools import orphans
from tests.helpers import room_rows
from tests.test_processes import ROOT, agentdeck, reap
from tests.test_review import crashed_shell
from tests.wait import until_sync as until

# The rerun finds `go` in the workspace and does not sleep; the crashed one did.
COMMAND = "[ -e go ] || sleep 120"


@pytest.fixture(params=["owned", "free"])
def crashed(request: pytest.FixtureRequest, tmp_path: Path, leftover: list[int]) -> Iterator[
    tuple[Path, str, str, dict]
]:  # fmt: skip
    """The crashed room, served by `agentdeck run` (owned) or by nobody (free)."""
    room, call_id, turn_id, record = anyio.run(crashed_shell, tmp_path, COMMAND)
    leftover.append(record["pgid"])
    owner = None
    if request.param == "owned":
        owner = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 cwd=ROOT)  # fmt: skip
        assert owner.stdout is not None and owner.stdout.readline().startswith("agentdeck run ")
    try:
        yield room, call_id, turn_id, record
    finally:
        reap(owner)


def listed(room: Path) -> list[dict]:
    out = agentdeck(room, "review", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_review_lists_the_call_with_its_facts_and_kill_ends_its_group(crashed) -> None:
    room, call_id, turn_id, record = crashed
    [review] = until(lambda: listed(room), "the call is under review")
    assert (review["call_id"], review["turn_id"], review["tool"]) == (call_id, turn_id, "shell")
    assert review["args"] == {"command": f"echo x >> ran.log; {COMMAND}"}
    assert review["process"]["pgid"] == record["pgid"] and review["process"]["alive"]
    text = agentdeck(room, "review")
    assert text.returncode == 0, text.stderr
    assert f"{call_id}  shell " in text.stdout and COMMAND in text.stdout
    assert f"process group {record['pgid']}" in text.stdout and "still running" in text.stdout
    assert f"agentdeck decide {call_id} " in text.stdout
    assert f"agentdeck review kill {call_id}" in text.stdout

    killed = agentdeck(room, "review", "kill", call_id)
    assert killed.returncode == 0, killed.stderr
    assert killed.stdout.strip() == f"process group {record['pgid']} of call {call_id}: terminated"
    assert not orphans.alive(record)
    [review] = listed(room)
    assert (review["process"]["alive"], review["process"]["killed"]) == (False, "terminated")
    assert "killed by an operator (terminated)" in agentdeck(room, "review").stdout
    again = agentdeck(room, "review", "kill", call_id, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["result"] == "gone"
    assert agentdeck(room, "review", "kill", "c_nope").returncode == 2
    assert agentdeck(room, "review", "kill").returncode == 2


def test_decide_fail_ends_the_call_failed_and_the_turn_finishes(crashed) -> None:
    room, call_id, turn_id, record = crashed
    until(lambda: listed(room), "the call is under review")
    cancel = agentdeck(room, "decide", call_id, "cancel")  # not for a call under review
    assert cancel.returncode == 1 and "mark it failed instead" in cancel.stderr
    assert f"decide: agentdeck decide {call_id} fail|rerun" in cancel.stderr  # the hint
    out = agentdeck(room, "decide", call_id, "fail", "--reason", "it hung", "--json")
    assert out.returncode == 0, out.stderr
    outcome = json.loads(out.stdout)
    assert (outcome["turn_id"], outcome["status"], outcome["reason"]) == (
        turn_id, "done", "natural")  # fmt: skip
    [(status, error)] = room_rows(room, "SELECT status, error FROM tool_calls")
    assert status == "failed" and "marked it failed: it hung" in error
    assert listed(room) == []
    assert (room / "workspace" / "ran.log").read_text() == "x\n"  # it never ran again


def test_decide_rerun_runs_the_call_once_more(crashed) -> None:
    room, call_id, turn_id, record = crashed
    until(lambda: listed(room), "the call is under review")
    assert agentdeck(room, "review", "kill", call_id).returncode == 0
    assert agentdeck(room, "decide", call_id, "rerun", "--remember", "room").returncode == 2
    other = "0" * 64  # bound to other arguments: refused, nothing runs
    refused = agentdeck(room, "decide", call_id, "rerun", "--args-hash", other)
    assert refused.returncode == 1 and "not the arguments" in refused.stderr
    (room / "workspace" / "go").touch()
    out = agentdeck(room, "decide", call_id, "rerun", "--json")
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["status"], json.loads(out.stdout)["reason"]) == (
        "done", "natural")  # fmt: skip
    assert room_rows(room, "SELECT status FROM tool_calls") == [("succeeded",)]
    assert (room / "workspace" / "ran.log").read_text() == "x\nx\n"  # once more, only once
    assert agentdeck(room, "decide", call_id, "rerun").returncode in (0, 1)  # a duplicate
    assert (room / "workspace" / "ran.log").read_text() == "x\nx\n"


def test_an_invoke_behind_a_call_a_killed_decide_left_running_says_so_and_queues_nothing(
    tmp_path: Path, leftover: list[int]
) -> None:
    """A one-off `invoke` on a thread whose `decide` was SIGKILLed while its shell call ran
    used to queue behind that turn for ever ("thread waiting on a decision"), holding the
    room so that no `decide` from another shell could reach it. It finishes what the
    stopped run left first (the call goes up for review), then says the thread waits on a
    decision and exits 2, with nothing left queued."""
    room, call_id, turn_id, record = anyio.run(crashed_shell, tmp_path, COMMAND)
    leftover.append(record["pgid"])
    out = agentdeck(room, "invoke", "--thread", "t", "hello again")
    assert out.returncode == 2, out.stderr
    assert f"has a turn waiting for a decision ({turn_id})" in out.stderr
    assert room_rows(room, "SELECT count(*) FROM turn_requests WHERE status='queued'") == [(0,)]
    assert agentdeck(room, "decide", call_id, "fail").returncode == 0
    again = agentdeck(room, "invoke", "--thread", "t", "hello again")
    assert again.returncode == 0, again.stderr
