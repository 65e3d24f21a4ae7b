"""A tool's answer in the chat as people read it: `$ command`, an exit badge, the output as
text (stderr apart), cut after a screenful; never the JSON the model reads."""

from __future__ import annotations

import json

import pytest

from console.state import CallRow
from console.tool_lines import TOOL_LINES, find_call, outcome, tool_text, what
from console.widgets.chat_log import ChatLog
from engine.lifecycle import CallStatus
from tests.console.helpers import SIZE, approved, until

pytestmark = pytest.mark.anyio
STYLES = {k: "" for k in ("head", "muted", "ok", "bad")}


def shell(command: str, result: dict) -> tuple[CallRow, str]:
    text = json.dumps(result)
    return CallRow("c", "t", "th", "shell", {"command": command}, CallStatus.SUCCEEDED,
                   result=text), text  # fmt: skip


def test_the_calls_pane_reads_a_call_as_people_do_not_as_json() -> None:
    call, _ = shell("seq 3", {"exit_code": 0, "stdout": "1\n2\n3\n", "stderr": ""})
    assert (what(call), outcome(call)) == ("$ seq 3", "exit 0 · 3 lines · 1")
    failed, _ = shell("false", {"exit_code": 1, "stdout": "", "stderr": ""})
    assert outcome(failed) == "exit 1"
    read = CallRow("c", "t", "th", "read_file", {"path": "notes/a.md"}, CallStatus.FAILED,
                   error="no such file: notes/a.md")  # fmt: skip
    assert (what(read), outcome(read)) == ("notes/a.md", "no such file: notes/a.md")
    calc = CallRow("c", "t", "th", "calc", {"expression": "6*7"}, CallStatus.SUCCEEDED,
                   result="42")  # fmt: skip
    assert (what(calc), outcome(calc)) == ('{"expression": "6*7"}', "42")


def test_a_shell_answer_is_its_command_its_exit_and_its_output() -> None:
    call, text = shell("ls", {"exit_code": 0, "stdout": "a.txt\nb.txt\n", "stderr": ""})
    assert find_call(text, [call]) is call
    assert tool_text(text, call, STYLES).plain == "$ ls   exit 0 \na.txt\nb.txt"


def test_stderr_is_set_apart_and_a_long_output_is_cut() -> None:
    out = "".join(f"line {n}\n" for n in range(30))
    call, text = shell("make", {"exit_code": 2, "stdout": out, "stderr": "boom\n"})
    shown = tool_text(text, call, STYLES).plain.split("\n")
    assert shown[0] == "$ make   exit 2 "
    assert shown[1 : 1 + TOOL_LINES] == [f"line {n}" for n in range(TOOL_LINES)]
    assert shown[1 + TOOL_LINES].startswith(f"… +{30 - TOOL_LINES} lines")
    assert shown[-1] == "stderr boom"
    assert '"exit_code"' not in "\n".join(shown)


def test_control_characters_in_output_are_shown_escaped() -> None:
    call, text = shell("x", {"exit_code": 0, "stdout": "\x1b[31mred\x07", "stderr": ""})
    assert "\x1b" not in tool_text(text, call, STYLES).plain


@pytest.mark.console
async def test_the_chat_shows_a_finished_shell_call_as_text(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, "run `echo chat-ok`")
        await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                    "ran")  # fmt: skip
        await pilot.pause()
        log = main.query_one(ChatLog)
        shown = "\n".join(log.render_line(y).text for y in range(log.size.height))
        assert "$ echo chat-ok" in shown and "exit 0" in shown
        assert '"exit_code"' not in shown and "\\n" not in shown
        assert "`shell` exited 0: chat-ok" in shown  # the agent says it, briefly
        await app.shutdown()
