"""What the CLI prints of the room is text: a user's message or a thread id holding the
terminal's control characters (a screen clear, a title change, a right-to-left override)
is printed with them as spaces, in history, a turn's report and the run's log."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.cli import main
from engine.cli.running import log_line
from engine.domain.events import TurnStarted
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime

HOSTILE = "hi \x1b[2J\x1b]0;owned\x07 there\u202e"
THREAD = "t\x1b[31m:red"


def a_turn(room: Path) -> str:
    async def run() -> str:
        async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
            message = Message(origin="invoke", sender="t", thread_id=THREAD, text=HOSTILE)
            return (await rt.run_turn(message)).turn_id

    return anyio.run(run)


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    out, err = capsys.readouterr()
    return out + err


def test_history_and_a_turn_print_the_room_s_text_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    turn = a_turn(room)
    for args in (("history",), ("history", "--turn", turn), ("history", "--threads")):
        text = printed(capsys, "--room", str(room), *args)
        assert "t [31m:red" in text and "\x1b" not in text, args
        assert all(c.isprintable() for c in text.replace("\n", "")), args


def test_the_run_log_prints_a_message_as_text() -> None:
    event = TurnStarted(at=0.0, thread_id=THREAD, turn_id="t1", origin="invoke", sender="t",
                        text=HOSTILE, strategy="react", group="chat")  # fmt: skip
    line = log_line(event)
    assert line is not None and all(c.isprintable() for c in line)
    assert "t [31m:red t1 started (invoke): hi  [2J ]0;owned  there" in line
