"""Breakpoints from the command line (issue 36): `agentdeck break add|list|rm` on a room nobody
owns and through an owner, `agentdeck decide CALL continue|step` on a pause (bound to the
arguments shown, or to an edit of them), and `agentdeck pending` showing a pause as text.
Bad input is one line and exit 2, and records nothing. The CLI runs in this process
(`engine.cli.main`); the owner is a runtime serving its API in this process too, but for
one test (a real `agentdeck run`: the process tier)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.cli import main
from engine.cli.breakpoints import breakpoints_now
from engine.domain.messages import Message
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.helpers import room_bytes, room_rows
from tests.test_processes import ROOT, agentdeck, reap

pytestmark = pytest.mark.usefixtures("store_backend")


def cli(room: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--room", str(room), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def check_manage(room: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """add, list, rm and their refusals, wherever the room is."""
    code, out, _ = cli(room, capsys, "break", "add", "call", "--tool", "shell", "--pattern",
                       "rm *", "--reason", "careful", "--json")  # fmt: skip
    made = json.loads(out)
    assert code == 0 and (made["kind"], made["tool"], made["pattern"]) == ("call", "shell", "rm *")
    assert (made["scope"], made["made_by"], made["reason"], made["hits"]) == (
        "room", "operator", "careful", 0)  # fmt: skip
    code, out, _ = cli(room, capsys, "break", "add", "inference", "--thread", "chat:main")
    assert code == 0 and out.endswith(": before each inference, thread chat:main\n")
    inference = out.split()[1]
    code, out, _ = cli(room, capsys, "break", "add", "result", "--group", "task", "--json")
    group = json.loads(out)
    assert code == 0 and (group["scope"], group["group"], group["tool"]) == ("group", "task", None)
    code, out, _ = cli(room, capsys, "break", "add", "result", "--tool", "calc", "--scope", "once")
    assert code == 0 and out.endswith(": after a result of calc, once\n")
    for bad, says in [
        (["call", "--tool", "nope"], "unknown tool 'nope'"),
        (["call", "--tool", "read_file", "--pattern", "../x"], "read_file pattern '../x'"),
        (["inference", "--scope", "thread"], "--scope thread needs --thread ID"),
        (["result", "--scope", "group"], "--scope group needs --group G"),
        (["result", "--group", "nope"], "unknown group 'nope'"),
        (["inference", "--tool", "shell"], "takes no --tool or --pattern"),
        (["call", "--pattern", "ls*"], "--pattern matches one tool's arguments: give --tool"),
        (["call", "--scope", "room", "--thread", "x"], "--thread is for a thread (or once)"),
        (["call", "--thread", ""], "--thread: String should have at least 1 character"),
    ]:  # fmt: skip
        code, out, err = cli(room, capsys, "break", "add", *bad)
        assert (code, out) == (2, ""), (bad, err)
        assert says in one_line(err), (bad, err)
    code, out, _ = cli(room, capsys, "break", "list", "--json")
    listed = json.loads(out)
    assert [p["id"] for p in listed][:2] == [made["id"], inference] and len(listed) == 4
    code, out, _ = cli(room, capsys, "break")  # `list` is the default
    head, *rows = out.splitlines()
    assert code == 0 and head.split() == ["id", "kind", "where", "scope", "hits", "last", "hit",
                                          "made", "by", "made", "at"]  # fmt: skip
    assert rows[0].split()[:6] == [made["id"], "call", "shell", '"rm', '*"', "room"]
    assert rows[1].split()[:6] == [inference, "inference", "—", "thread", "chat:main", "0"]
    assert rows[2].split()[:5] == [group["id"], "result", "any", "tool", "group"]
    assert "never" in rows[0] and "operator" in rows[0]
    code, _, err = cli(room, capsys, "break", "rm", "b000000")
    assert code == 2 and "no breakpoint b000000" in one_line(err)
    code, out, _ = cli(room, capsys, "break", "rm", made["id"], "--json")
    removed = json.loads(out)
    assert code == 0 and (removed["breakpoint"]["id"], removed["removed_by"]) == (made["id"],
                                                                              "operator")  # fmt: skip
    code, out, _ = cli(room, capsys, "break", "rm", group["id"])
    assert (
        code == 0
        and out == f"breakpoint {group['id']} removed: after a result of any tool, group task\n"
    )
    code, _, err = cli(room, capsys, "break", "rm", made["id"])
    assert code == 2 and "no breakpoint" in one_line(err)
    code, out, _ = cli(room, capsys, "break", "--json")
    assert [p["id"] for p in json.loads(out)] == [inference, listed[3]["id"]]


def test_break_on_a_room_nobody_owns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    room = tmp_path / "room"
    code, _, err = cli(room, capsys, "break", "list")
    assert code == 0 and "no breakpoints" in err and not room.exists()  # read: nothing made
    check_manage(room, capsys)
    runs, before = room_rows(room, "SELECT count(*) FROM runs"), room_bytes(room)
    assert cli(room, capsys, "break", "list")[0] == 0
    assert room_rows(room, "SELECT count(*) FROM runs") == runs  # a listing opens no run
    assert room_bytes(room) == before  # and writes nothing
    kinds = room_rows(room, "SELECT DISTINCT kind FROM runs")
    assert kinds == [("break",)]  # each add and rm opened the room for itself


@asynccontextmanager
async def served(room: Path) -> AsyncIterator[Runtime]:
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt, serve_api(rt):
        yield rt


@pytest.mark.anyio
async def test_break_through_the_owner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    room = tmp_path / "room"
    async with served(room) as rt:
        await anyio.to_thread.run_sync(check_manage, room, capsys)
        assert [p.kind for p in rt.breakpoints.listed()] == ["inference", "result"]  # its own book
        # `list` was answered off the owner's socket (engine/cli/light.py)
        args = argparse.Namespace(break_action="list", json=True)
        assert await anyio.to_thread.run_sync(breakpoints_now, rt.room, args) == 0
        assert len(json.loads(capsys.readouterr().out)) == 2
    assert room_rows(room, "SELECT kind FROM runs") == [("run",)]  # nothing opened the room


# -- decide continue|step, and pending's text --------------------------------------------


def paused_turn(room: Path, text: str, thread: str = "t:1") -> str:
    """Run one turn (the offline model, built-in tools) until it waits; its turn id."""

    async def run() -> str:
        async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
            message = Message(origin="invoke", sender="t", thread_id=thread, text=text)
            outcome = await rt.run_turn(message)
            assert outcome.status == "waiting", outcome
            return outcome.turn_id

    return anyio.run(run)


def pending(room: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, _ = cli(room, capsys, "pending", "--json")
    assert code == 0
    return list(json.loads(out))


def decisions(room: Path) -> int:
    return int(room_rows(room, "SELECT count(*) FROM decisions")[0][0])


def test_step_and_continue_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    assert cli(room, capsys, "break", "add", "inference", "--scope", "once")[0] == 0
    paused_turn(room, "calc 2+3")
    [pause] = pending(room, capsys)
    assert (pause["tool"], pause["awaiting"], pause["args"]["at"]) == ("breakpoint", "breakpoint",
                                                                       "inference")  # fmt: skip
    # step: one inference, then a pause before its call (the report says so, exit 3: waiting)
    code, out, err = cli(room, capsys, "decide", pause["call_id"], "step")
    assert (code, out) == (3, "")
    assert "⏸ paused before calls (round 1)" in err and "after a step" in err
    assert "held call " in err and 'calc {"expression": "2+3"}' in err
    [pause] = pending(room, capsys)
    assert pause["args"]["at"] == "call"
    [held] = pause["args"]["calls"]
    # bad input on a pause: exit 2, one line, nothing recorded, the pause still waits
    before = decisions(room)
    edited = {**pause["args"], "calls": [{**held, "args": {"expression": "6*7"}}]}
    sneaky = {**pause["args"], "at": "result"}
    bad_file = tmp_path / "missing.json"
    for args, says in [
        (["continue", "--args", json.dumps(sneaky)], "only `calls` of a breakpoint's pause"),
        (["step", "--result", "1"], "step goes on from a breakpoint's pause: it takes no --result"),
        (["continue", "--remember", "room"], "takes no --result, --remember"),
        (["continue", "--args", "{}", "--args-file", "x"], "give --args or --args-file, not both"),
        (["continue", "--args-file", str(bad_file)], "cannot be read (No such file"),
        (["continue", "--args", "[1]"], "--args must be a JSON object"),
        (["fail"], "decision refused: a breakpoint's pause takes continue"),
    ]:  # fmt: skip
        code, _, err = cli(room, capsys, "decide", pause["call_id"], *args)
        if args == ["fail"]:  # the engine's refusal: recorded as refused, exit 1
            assert code == 1 and says in err, err
            continue
        assert code == 2 and says in one_line(err), (args, err)
    assert decisions(room) == before + 1  # only the refused `fail`
    assert [p["call_id"] for p in pending(room, capsys)] == [pause["call_id"]]
    # continue with the held call's arguments edited (from a file): it runs with them
    (tmp_path / "edit.json").write_text(json.dumps(edited))
    code, out, err = cli(room, capsys, "decide", pause["call_id"], "continue",
                         "--args-file", str(tmp_path / "edit.json"), "--json")  # fmt: skip
    done = json.loads(out)
    assert code == 0 and (done["status"], done["reason"]) == ("done", "natural")
    assert done["text"] == "`calc` returned: 42" and done["decision"]["status"] == "queued"
    assert room_rows(room, "SELECT args FROM tool_calls WHERE tool = 'calc'") == [
        ('{"expression": "6*7"}',)]  # fmt: skip
    # deciding it again changes nothing: exit 1
    code, _, err = cli(room, capsys, "decide", pause["call_id"], "continue")
    assert code == 1 and "already decided" in err
    [(hash_,)] = room_rows(room, "SELECT args_hash FROM decisions WHERE status = 'applied' "
                           "AND action = 'step'")  # fmt: skip
    assert hash_ is not None  # the step was bound to the arguments pending showed


def test_continue_and_step_are_for_a_pause_and_approve_works_as_continue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    paused_turn(room, "run `ls`", "t:a")  # a shell call waiting for its approval
    [ask] = pending(room, capsys)
    for word in ("continue", "step"):
        code, _, err = cli(room, capsys, "decide", ask["call_id"], word)
        assert code == 2 and "waits for an approval: approve or cancel it" in one_line(err)
    assert decisions(room) == 0
    assert cli(room, capsys, "break", "add", "result", "--tool", "calc", "--thread", "t:b")[0] == 0
    paused_turn(room, "calc 1+1", "t:b")
    [pause] = [p for p in pending(room, capsys) if p["awaiting"] == "breakpoint"]
    assert pause["args"]["calls"][0]["result"] == "2"
    code, _, err = cli(room, capsys, "decide", pause["call_id"], "approve")
    assert code == 0 and "done/natural" in err


def test_pending_shows_a_pause_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    room = tmp_path / "room"
    assert cli(room, capsys, "break", "add", "inference", "--scope", "once")[0] == 0
    turn = paused_turn(room, "hello \x1b[2J\x1b]0;owned\x07 there\u202e\nsecond line", "t\x1b:x")
    code, out, err = cli(room, capsys, "pending")
    assert code == 0 and err == ""
    first, why, message, decide = out.splitlines()
    [pause] = pending(room, capsys)
    assert first.startswith(f"{pause['call_id']}  ⏸ paused before an inference (round 0) — "
                            f"turn {turn} thread t :x, waiting ")  # fmt: skip
    assert why.strip().startswith("at breakpoint b") and why.strip().endswith(
        "(before each inference, once)"
    )
    assert message == "    pending user message: hello  [2J ]0;owned  there  second line"
    assert decide == (f"    decide: agentdeck decide {pause['call_id']} continue|step|cancel "
                      "(edit a message's `text` in `messages`: --args JSON)")  # fmt: skip
    assert all(c.isprintable() for c in out.replace("\n", ""))
    # --json is a PendingCall, as for any waiting call
    paused_turn(room, "run `ls`", "t:2")
    pause, ask = pending(room, capsys)
    assert set(pause) == set(ask) and pause["args_hash"] and pause["reason"].startswith("paused")


def test_a_pause_through_the_owner_as_an_operator_sees_it(tmp_path: Path) -> None:
    """A real `agentdeck run`: a breakpoint set, a turn pauses, stepped, then continued."""
    room = tmp_path / "room"
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("agentdeck run ")
        made = agentdeck(room, "break", "add", "inference", "--scope", "once", "--json")
        assert made.returncode == 0, made.stderr
        ran = agentdeck(room, "invoke", "--json", "calc 2+3")
        assert ran.returncode == 3 and json.loads(ran.stdout)["status"] == "waiting"
        shown = agentdeck(room, "pending")
        assert "⏸ paused before an inference (round 0)" in shown.stdout, shown
        assert "pending user message: calc 2+3" in shown.stdout
        [pause] = json.loads(agentdeck(room, "pending", "--json").stdout)
        stepped = agentdeck(room, "decide", pause["call_id"], "step")
        assert stepped.returncode == 3 and "⏸ paused before calls (round 1)" in stepped.stderr
        [pause] = json.loads(agentdeck(room, "pending", "--json").stdout)
        went = agentdeck(room, "decide", pause["call_id"], "continue", "--json")
        assert went.returncode == 0 and json.loads(went.stdout)["text"] == "`calc` returned: 5"
        listed = json.loads(agentdeck(room, "break", "list", "--json").stdout)
        assert [(p["id"], p["hits"]) for p in listed] == [(json.loads(made.stdout)["id"], 1)]
    finally:
        reap(proc)
    assert room_rows(room, "SELECT kind FROM runs") == [("run",)]  # every command went through it


def test_pending_prints_any_waiting_call_s_thread_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A thread id is anyone's text (invoke --thread, the API): a waiting call's line says it
    without the terminal's control characters, as a pause's does."""
    room = tmp_path / "room"
    paused_turn(room, "run `ls`", "t\x1b[2J\x1b]0;owned\x07:x")  # shell asks first
    code, out, err = cli(room, capsys, "pending")
    assert code == 0 and err == ""
    [line] = out.splitlines()
    assert " on t [2J ]0;owned :x (turn " in line
    assert all(c.isprintable() for c in line)
