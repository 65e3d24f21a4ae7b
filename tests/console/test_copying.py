"""`y` copies the selected call's command (a shell command itself, other arguments as
JSON), `Y` its output: in the queue, the calls pane and the details; by OSC 52."""

from __future__ import annotations

import pytest

from console.copying import copied_text
from console.state import CallRow
from engine.lifecycle import CallStatus
from tests.console.helpers import SIZE, call_waits, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]


def test_what_is_copied_of_a_call() -> None:
    shell = CallRow("c", "t", "th", "shell", {"command": "ls -la | wc -l"}, CallStatus.SUCCEEDED,
                    result="3\n")  # fmt: skip
    assert copied_text(shell, "command") == "ls -la | wc -l"
    assert copied_text(shell, "output") == "3\n"
    write = CallRow("c", "t", "th", "write_file", {"path": "a", "text": "b"}, CallStatus.FAILED,
                    error="denied")  # fmt: skip
    assert copied_text(write, "command") == '{\n  "path": "a",\n  "text": "b"\n}'
    assert copied_text(write, "output") == "denied"
    waiting = CallRow("c", "t", "th", "shell", {"command": "x"}, CallStatus.SUSPENDED)
    assert copied_text(waiting, "output") is None


async def test_y_copies_the_command_in_the_queue_and_y_the_output_in_the_calls(deck_app):
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo copy-me`")
        main.query_one("#decisions").focus()
        await pilot.press("y")
        assert app.clipboard == "echo copy-me"
        await pilot.press("a")
        await until(pilot, lambda: not main.state.pending and main.state.counts() == (0, 0),
                    "ran")  # fmt: skip
        main.query_one("#calls").focus()
        await pilot.press("Y")
        await until(pilot, lambda: "copy-me" in app.clipboard, "the output copied")
        await app.shutdown()
