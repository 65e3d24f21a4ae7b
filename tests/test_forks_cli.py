"""Fork and replay from the command line (issue 37): `agentdeck fork TURN STEP` and `agentdeck
replay TURN` on a room nobody owns (the room opened for the command, its turn waited for
here) and through an owner (its API; `--wait` or not), the new thread and where it came
from said, `--json` the record (with the turn's outcome once waited for), exit codes as
`invoke`'s; bad input one line and exit 2, nothing made. `history --threads` draws the
forks beneath their thread, `history` and `history --turn` say where a thread came from.
The CLI runs in this process (`engine.cli.main`); so does the owner."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.cli import main
from engine.domain.messages import ConvMessage, Message
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.helpers import room_rows

pytestmark = pytest.mark.usefixtures("store_backend")


def cli(room: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--room", str(room), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def a_turn(room: Path, text: str = "calc 2+3", thread: str = "t1") -> str:
    """One turn of the offline model, run in a runtime of its own; its id."""

    async def run() -> str:
        async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
            message = Message(origin="invoke", sender="t", thread_id=thread, text=text)
            return (await rt.run_turn(message)).turn_id

    return anyio.run(run)


def steps(room: Path, turn: str) -> list[tuple[int, str]]:
    rows = room_rows(room, "SELECT id, kind FROM steps WHERE turn_id = ? ORDER BY id", turn)
    return [(int(i), k) for i, k in rows]


def entries(room: Path, thread: str) -> list[ConvMessage]:
    rows = room_rows(room, "SELECT body FROM messages WHERE thread_id = ? ORDER BY seq", thread)
    return [ConvMessage.model_validate_json(b) for (b,) in rows]


def forks(room: Path) -> int:
    return int(room_rows(room, "SELECT count(*) FROM forks")[0][0])


def check_bad_input(room: Path, capsys: pytest.CaptureFixture[str], turn: str, step: int,
                    tmp_path: Path) -> None:  # fmt: skip
    """Each is one line and exit 2, and makes nothing."""
    before = forks(room)
    big, good = tmp_path / "bad.txt", tmp_path / "good.txt"
    big.write_bytes(b"\xff\xfe not UTF-8")
    good.write_text("42")
    for args, says in [
        (["fork", turn, str(step), "--edit", "1=x"], "only a user message or a tool result"),
        (["fork", turn, str(step), "--edit", "9=x"], "entry 9 is not in the fork"),
        (["fork", turn, str(step), "--edit", "x=1"], "--edit 'x=1': give SEQ=TEXT"),
        (["fork", turn, str(step), "--edit", "2=a", "--edit-file", f"2={good}"],
         "entry 2 is edited twice"),
        (["fork", turn, str(step), "--edit-file", f"2={big}"], "cannot be read"),
        (["fork", turn, str(step), "--edit-file", f"2={tmp_path / 'none'}"], "cannot be read"),
        (["fork", turn, "99999"], f"no step 99999 in turn {turn}"),
        (["fork", turn, "two"], "STEP must be a step's id, a number"),
        (["fork", "nope", str(step)], "no step"),
        (["fork", turn, str(step), "--thread", "t1"], "thread t1 exists"),
        (["fork", turn, str(step), "--group", "nope"], "unknown group 'nope'"),
        (["fork", turn, str(step), "--thread", ""], "--thread: String should have at least"),
        (["replay", "nope"], "no turn nope"),
        (["replay", turn, "--model", "gpt"], "--model: String should match pattern"),
        (["replay", turn, "--model", "acme:x"], "a provider (offline, openai, anthropic)"),
        (["replay", turn, "--instructions-file", str(tmp_path / "none")], "cannot be read"),
        (["replay", turn, "--group", "nope"], "unknown group 'nope'"),
    ]:  # fmt: skip
        code, out, err = cli(room, capsys, *args)
        assert (code, out) == (2, ""), (args, out, err)
        assert says in one_line(err), (args, err)
    assert forks(room) == before


def test_fork_and_replay_on_a_room_nobody_owns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    turn = a_turn(room)
    first, _, last = (s for s, _ in steps(room, turn))  # inference, tool round, inference
    # a fork at the first inference copies its call's result too, edited: the turn it
    # starts runs here (nobody else would) and its answer is printed as invoke prints it
    code, out, err = cli(room, capsys, "fork", turn, str(first), "--edit", "2=41",
                         "--group", "task")  # fmt: skip
    made, started, answer = out.splitlines()
    assert code == 0 and made.startswith("fork t1~fork-")
    thread = made.split()[1].rstrip(":")
    assert made.endswith(f": fork of t1 at step {first} (turn {turn}), group task, 3 entries "
                         "copied, entry 2 edited")  # fmt: skip
    assert started.startswith("turn ") and started.endswith(f" started on {thread}")
    assert answer == "`calc` returned: 41" and "done/natural" in err
    copy = entries(room, thread)
    assert [e.text for e in copy[:3]] == ["calc 2+3", "Running 1 tool.", "41"]
    # the last step: the whole record, which waits for nothing: no turn, said how to go on
    code, out, _ = cli(room, capsys, "fork", turn, str(last), "--thread", "whole", "--json")
    whole = json.loads(out)
    assert code == 0 and (whole["thread_id"], whole["upto"], whole["turn_id"]) == ("whole", 4,
                                                                                   None)  # fmt: skip
    assert "outcome" not in whole and whole["made_by"] == "cli"
    # a replay against another model, with instructions from a file: waited for, --json
    (tmp_path / "told.md").write_text("Answer briefly.")
    code, out, _ = cli(room, capsys, "replay", turn, "--model", "offline:other",
                       "--instructions-file", str(tmp_path / "told.md"), "--json")  # fmt: skip
    replay = json.loads(out)
    assert code == 0 and replay["kind"] == "replay" and replay["from_turn"] == turn
    assert (replay["outcome"]["status"], replay["outcome"]["text"]) == ("done",
                                                                        "`calc` returned: 5")  # fmt: skip
    assert room_rows(room, "SELECT model FROM turns WHERE id = ?", replay["turn_id"]) == [
        ("offline:other",)]  # fmt: skip
    check_bad_input(room, capsys, turn, first, tmp_path)
    # history: the forks beneath their thread, each saying where it came from
    code, out, _ = cli(room, capsys, "history", "--threads")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[2] == "t1"
    names = [line.split()[2:4] for line in lines[1:]]
    assert names == [["├─", thread], ["├─", "whole"], ["└─", replay["thread_id"]]]
    assert lines[1].endswith(f"fork of t1 at step {first} (turn {turn})")
    assert lines[3].endswith(f"replay of turn {turn}")
    code, out, _ = cli(room, capsys, "history", "--turn", turn)
    assert f"  forked at step {first} to {thread} (task, by cli at " in out
    assert f"  replayed in {replay['thread_id']} (chat, by cli at " in out
    assert f"inference  succeeded id {first} " in out  # the step ids a fork names
    code, out, _ = cli(room, capsys, "history", "--turn", replay["turn_id"])
    assert f"  thread {replay['thread_id']}: replay of turn {turn}, 0 entries copied, by cli" in out
    code, out, _ = cli(room, capsys, "history", "--thread", thread)
    assert out.rstrip().endswith(f"· fork of t1 at step {first} (turn {turn})")
    code, _, err = cli(room, capsys, "history", "--threads", "--status", "done")
    assert code == 2 and "--threads lists threads" in one_line(err)


def test_a_replay_that_stops_for_a_decision_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    turn = a_turn(room, "run `ls`")  # a shell call: it waits for an approval
    code, out, err = cli(room, capsys, "replay", turn, "--thread", "again")
    assert code == 3 and out.splitlines()[0] == f"replay again: replay of turn {turn}, group " \
        "chat, 0 entries copied"  # fmt: skip
    assert "waiting" in err and "pending " in err
    [(status,)] = room_rows(room, "SELECT status FROM turns WHERE thread_id = 'again'")
    assert status == "waiting"


@asynccontextmanager
async def served(room: Path) -> AsyncIterator[Runtime]:
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt, serve_api(rt):
        yield rt


@pytest.mark.anyio
async def test_fork_and_replay_through_the_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    async with served(room) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t1",
                                        text="calc 2+3"))  # fmt: skip
        turn = out.turn_id
        first = (await anyio.to_thread.run_sync(steps, room, turn))[0][0]

        def through() -> dict[str, Any]:
            # without --wait: the thread and the turn it started, exit 0 at once
            code, out, _ = cli(room, capsys, "fork", turn, str(first), "--thread", "f1")
            made, started = out.splitlines()
            assert code == 0 and made.startswith(f"fork f1: fork of t1 at step {first}")
            assert started.startswith("turn ") and started.endswith(" started on f1")
            # --wait: the outcome as invoke prints it
            code, out, err = cli(room, capsys, "replay", turn, "--strategy", "react", "--wait")
            assert code == 0 and out.splitlines()[-1] == "`calc` returned: 5"
            assert "compare: agentdeck diff " + turn in err
            code, out, _ = cli(room, capsys, "fork", turn, str(first), "--edit", "0=calc 6*7",
                               "--wait", "--json")  # fmt: skip
            check_bad_input(room, capsys, turn, first, tmp_path)
            return {"code": code, "made": json.loads(out), "started": started.split()[1]}

        said = await anyio.to_thread.run_sync(through)
        assert said["code"] == 0 and said["made"]["outcome"]["status"] == "done"
        assert said["made"]["edited"] == {"0": "calc 6*7"}
        with anyio.fail_after(60):
            waited = await rt.wait_turn(said["started"])
        assert waited.status == "done"
    assert room_rows(room, "SELECT kind FROM runs") == [("run",)]  # nothing opened the room
