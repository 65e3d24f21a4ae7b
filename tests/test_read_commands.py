"""Read-only commands open no run (issue 28): `agentdeck pending` and `agentdeck rules` on a
room nobody owns read its store and change nothing, where they opened a runtime (a run of
kind `pending`, `rules`) before. A room a dead run left with a call running is the one
exception: that call is put up for review first (a write), as any runtime opening the
room does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from tests.helpers import room_bytes, room_rows, room_write
from tests.test_cli_input import waiting_call

pytestmark = pytest.mark.usefixtures("store_backend")


def a_room_with_a_waiting_call_and_a_rule(room: Path) -> str:
    call_id = waiting_call(room)
    assert main(["--room", str(room), "rules", "add", "--tool", "shell", "--effect", "allow",
                 "--pattern", "git status*"]) == 0  # fmt: skip
    return call_id


def test_pending_and_rules_read_a_free_room_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    call_id = a_room_with_a_waiting_call_and_a_rule(room)
    runs, before = room_rows(room, "SELECT count(*) FROM runs"), room_bytes(room)
    capsys.readouterr()
    assert main(["--room", str(room), "pending", "--json"]) == 0
    [call] = json.loads(capsys.readouterr().out)
    assert (call["call_id"], call["tool"], call["awaiting"]) == (call_id, "shell", "decision")
    assert main(["--room", str(room), "rules", "--json"]) == 0
    [rule] = json.loads(capsys.readouterr().out)
    assert (rule["tool"], rule["effect"], rule["pattern"]) == ("shell", "allow", "git status*")
    assert room_rows(room, "SELECT count(*) FROM runs") == runs  # no run of kind pending, rules
    assert room_bytes(room) == before  # nothing written at all


def test_a_room_nobody_made_is_read_as_empty_and_not_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "nowhere"
    assert main(["--room", str(room), "pending", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--room", str(room), "rules", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert not room.exists()


def test_a_call_a_dead_run_left_running_is_put_up_for_review_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    call_id = a_room_with_a_waiting_call_and_a_rule(room)
    # as a run killed while the call ran leaves it (its turn interrupted, the call running)
    room_write(room, "UPDATE tool_calls SET status='running', suspend_reason=NULL,"
                     " awaiting=NULL WHERE id=?", call_id)  # fmt: skip
    room_write(room, "UPDATE turns SET status='running', reason=NULL")
    capsys.readouterr()
    assert main(["--room", str(room), "pending", "--json"]) == 0
    [call] = json.loads(capsys.readouterr().out)
    assert (call["call_id"], call["awaiting"]) == (call_id, "review")
