"""Bad input to the command line is one line and an exit code, never a traceback, and it
changes nothing (issue 13, items 13 and 16)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from engine.cli import main
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.room import Ownership, Room
from engine.runtime import Runtime
from tests.helpers import room_rows

pytestmark = pytest.mark.usefixtures("store_backend")


def waiting_call(room: Path) -> str:
    async def run() -> str:
        async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
            message = Message(origin="invoke", sender="t", thread_id="t:1", text="run `ls`")
            outcome = await rt.run_turn(message)
            return str(outcome.pending[0]["call_id"])

    return anyio.run(run)


def call_status(room: Path, call_id: str) -> str:
    [(status,)] = room_rows(room, "SELECT status FROM tool_calls WHERE id=?", call_id)
    return str(status)


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--args", "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("--args", '{"n": ' + "9" * 5000 + "}", "not valid JSON"),
        ("--result", "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("--result", "9" * 5000, "not valid JSON"),
        ("--args", '{"a": ' + "[" * 900 + "]" * 900 + "}", "nested more than 64 deep"),
        ("--result", "[" * 100 + "]" * 100, "nested more than 64 deep"),
        # found by tests/fuzz: a lone surrogate was recorded, then ended the turn in error
        ("--args", '{"a": "\\ud800"}', "surrogates not allowed"),
        ("--result", '["\\udc00"]', "surrogates not allowed"),
    ],
)
def test_bad_decided_arguments_are_refused_and_the_call_keeps_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    room = tmp_path / "room"
    call_id = waiting_call(room)
    capsys.readouterr()
    code = main(["--room", str(room), "decide", call_id, "approve", flag, value])
    assert code == 2
    assert says in one_line(capsys)
    assert call_status(room, call_id) == "suspended"
    assert room_rows(room, "SELECT count(*) FROM decisions") == [(0,)]


@pytest.mark.parametrize(
    "toml",
    [
        "[groups.chat]\npriority = 99999999999999999999999\n",
        "[groups.chat]\nmax_queued_turns = 99999999999999999999\n",
        "[runtime]\nmax_rounds = 1000000000000000000000\n",
    ],
)
def test_numbers_sqlite_cannot_hold_are_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str
) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(toml)
    assert main(["--room", str(room), "invoke", "calc 1+1"]) == 2
    assert "agentdeck.toml" in one_line(capsys)


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("[groups.chat]\npriority = " + "9" * 5000 + "\n", "a number has more than 4300 digits"),
        ("x = [-" + "7" * 4301 + "]\n", "a number has more than 4300 digits"),
        ('"a\\nb" = 1\n', '["a\\nb"] Extra inputs'),
        ('[runtime."\\r"]\n', '[runtime."\\r"] Extra inputs'),
    ],
    ids=["huge-int", "huge-negative-int-in-array", "newline-key", "cr-section"],
)
def test_a_config_error_is_one_line_whatever_the_file_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, says: str
) -> None:
    # Found by tests/fuzz: a 5,000-digit integer was a ValueError out of tomllib (a
    # traceback), a key holding a newline split the error over two lines.
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(toml)
    for command in (["info"], ["invoke", "calc 1+1"]):
        assert main(["--room", str(room), *command]) == 2
        assert says in one_line(capsys)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["decide", "CALL", "cancel", "--reason", "no\udcff"], "--reason: not UTF-8 text"),
        (["invoke", "calc 1+1 \udcff"], "the text: not UTF-8 text"),
        (["invoke", "--thread", "t\udcff", "calc 1+1"], "--thread: not UTF-8 text"),
        (["invoke", "--thread", "", "calc 1+1"], "--thread: String should have at least 1"),
        (["invoke", "--thread", "t" * 600, "calc 1+1"], "--thread: String should have at most"),
    ],
    ids=["reason-byte", "text-byte", "thread-byte", "thread-empty", "thread-long"],
)
def test_text_no_message_can_hold_is_one_line_and_nothing_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    # Found by tests/fuzz: a byte that is not UTF-8 (argv holds it as a lone surrogate) was
    # a traceback from the conversation's JSON, and so were SubmitBody's own refusals.
    room = tmp_path / "room"
    call_id = waiting_call(room)
    capsys.readouterr()
    argv = [call_id if a == "CALL" else a for a in argv]
    assert main(["--room", str(room), *argv]) == 2
    assert says in one_line(capsys)
    assert call_status(room, call_id) == "suspended"
    assert room_rows(room, "SELECT count(*) FROM decisions") == [(0,)]
    assert room_rows(room, "SELECT count(*) FROM turns") == [(1,)]


@pytest.mark.parametrize("where", ["file", "proc", "db"])
def test_a_room_that_is_not_a_usable_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    if where == "file":
        room = tmp_path / "a-file"
        room.write_text("not a room")
    elif where == "db":
        waiting_call(tmp_path / "room")
        room = tmp_path / "room" / "execution.db"
        room.touch()  # the room's store file (a room on PostgreSQL has none: one as it were)
    else:
        room = Path("/proc/1")
    capsys.readouterr()
    # (a command that only reads reads a folder it cannot write: /proc/1 is read as empty)
    reads = [["pending"], ["rules"]] if where != "proc" else []
    for command in (["invoke", "calc 1+1"], *reads, ["run"]):
        assert main(["--room", str(room), *command]) == 2, command
        assert f"room {room}" in one_line(capsys)


def test_a_busy_room_has_its_own_exit_code(tmp_path: Path, capsys) -> None:
    room = Room.at(tmp_path / "room")
    room.create()
    holder = Ownership(room, "embed")  # serves no API: a client cannot act through it
    holder.acquire()
    try:
        assert main(["--room", str(room.path), "run"]) == 4
        assert "is owned by pid" in one_line(capsys)
        assert main(["--room", str(room.path), "start"]) == 4
        assert "already owned" in one_line(capsys)
    finally:
        holder.release()


def test_decide_on_a_room_nobody_owns_applies_the_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first look at the outcome does not wait; the turn the decision woke had not yet
    # said so in the room, so decide printed "waiting", exited 3 and closed the room with
    # the decision recorded and never applied.
    room = tmp_path / "room"
    call_id = waiting_call(room)
    capsys.readouterr()
    assert main(["--room", str(room), "decide", call_id, "approve"]) == 0, capsys.readouterr()
    assert call_status(room, call_id) == "succeeded"
    assert room_rows(room, "SELECT status FROM decisions") == [("applied",)]


def test_deciding_a_call_decided_already_exits_1_and_says_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loser of two decisions learns it lost: exit 1 (as `cancel` of an ended turn),
    "already decided" on stderr, and with --json a `decision` that says `duplicate` and
    names the winner. (Issue 25, a low item: it exited 0, and --json said nothing.)"""
    room = tmp_path / "room"
    call_id = waiting_call(room)
    capsys.readouterr()
    assert main(["--room", str(room), "decide", call_id, "approve"]) == 0
    capsys.readouterr()
    assert main(["--room", str(room), "decide", call_id, "cancel"]) == 1
    assert f"call {call_id} was already decided (succeeded)" in capsys.readouterr().err
    assert main(["--room", str(room), "decide", call_id, "approve", "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    winner = room_rows(room, "SELECT id FROM decisions WHERE status='applied'")[0][0]
    assert said["decision"]["status"] == "duplicate" and said["decision"]["winner"] == winner
    assert said["status"] == "done"  # and where the turn stands, as before
    assert call_status(room, call_id) == "succeeded"


@pytest.mark.one_store("the room's path and the CLI's parsing: no store is reached")
@pytest.mark.parametrize(
    ("args", "says"),
    [  # issue 25, the low items: each was a traceback
        (
            ["rules", "add", "--effect", "allow", "--tool", "shell", "--expires", "99999999999d"],
            "100 years",
        ),
        (
            ["rules", "add", "--effect", "allow", "--tool", "shell", "--expires", "0001-01-01"],
            "--expires",
        ),
        (["rules", "revoke", "99999999999999999999999"], "no rule"),
        (["deliveries", "retry", "99999999999999999999999"], "no delivery"),
        (["--room", "/" + "a" * 5000, "status"], "too long"),
        (["--room", "{file}", "status"], "not a directory"),
        (["--room", "{missing}", "status"], "no room at"),
    ],
)
def test_out_of_range_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    room = tmp_path / "room"
    waiting_call(room)  # a room with a store
    capsys.readouterr()
    (tmp_path / "file").write_text("")
    args = [a.format(file=tmp_path / "file", missing=tmp_path / "missing") for a in args]
    if args[0] != "--room":
        args = ["--room", str(room), *args]
    assert main(args) == 2
    assert says in one_line(capsys)


@pytest.mark.one_store("agentdeck.toml's parsing: no store is reached")
def test_a_rule_expiring_out_of_the_hosts_range_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`expires = 0001-01-01` west of UTC is before the epoch's year 1 in seconds: every
    command ended in a traceback ('year 0 is out of range')."""
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(
        '[[rules]]\neffect = "allow"\ntool = "shell"\nexpires = 0001-01-01\n'
    )
    try:
        assert main(["--room", str(room), "rules"]) == 2
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert "expires: 0001-01-01 is out of the range" in one_line(capsys)


def test_a_reader_that_went_away_gets_no_traceback(tmp_path: Path) -> None:
    """`agentdeck status | head -1`: the reader closes the pipe, the next print fails; the
    command ends quietly (141, as a shell says of SIGPIPE), no traceback on stderr."""
    import os
    import subprocess
    import sys

    Room.at(tmp_path / "room").create()
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", "--room", str(tmp_path / "room"), "status"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 141
