"""`agentdeck diff TURN_A TURN_B [--json]` (issue 37), run in this process: both turns'
facts side by side and the rows marked, cut to the terminal's width and free of control
characters; the TurnDiff as JSON; the same from a room nobody owns (no run made) and while
its owner runs; an unknown turn is one line and exit 2. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.cli import main
from engine.domain.turn_diff import TurnDiff
from engine.providers.base import ModelRequest
from tests.helpers import msg, room_rows, runtime
from tests.scripted import Reply, add, shell
from tests.test_turn_diff import original, two_turns

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
HOSTILE = "red \x1b[31mtext\x1b[0m\u202eevil\x07 and a\nsecond line"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def cli(*argv: str) -> int:
    """`agentdeck ARGV` in a thread (it runs an event loop of its own)."""
    return await anyio.to_thread.run_sync(main, list(argv))


def echo(request: ModelRequest) -> Reply:
    return Reply(text="you said: " + request.messages[-1].text)


async def test_text_marks_each_row_within_the_width_and_json_is_the_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = await two_turns(tmp_path)
    room = str(tmp_path / "room")
    runs = room_rows(tmp_path / "room", "SELECT count(*) FROM runs")
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert await cli("--room", room, "diff", a, b) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= 80
    assert out[0].split() == ["turn", "A", a, "│", "B", b]
    marked = {line[2:12].strip(): line[0] for line in out[1:12]}
    assert marked["model"] == "~" and marked["steps"] == "~" and marked["outcome"] == " "
    rows = [line for line in out[13:] if line[:1] in "=~<>"]
    assert [(line[0], line[2:13].strip()) for line in rows] == [
        ("=", "user"), ("=", "assistant"), ("~", "call add"), (">", "call add"),
        ("=", "call shell"), ("~", "assistant"), ("~", "assistant"),
    ]  # fmt: skip
    assert '{"a":2,"b":3} -> succeeded: 5' in rows[2] and '{"a":2,"b":4}' in rows[2]
    assert "changed: args (b: 3 -> 4), result" in out[out.index(rows[2]) + 1]
    assert rows[4].endswith("succeeded: …")  # cut at 80 cells
    assert "1 only in B" in out[13]
    assert room_rows(tmp_path / "room", "SELECT count(*) FROM runs") == runs  # read, not run

    monkeypatch.setenv("COLUMNS", "200")
    assert await cli("--room", room, "diff", a, b) == 0
    wide = capsys.readouterr().out.splitlines()
    assert "succeeded: ran ls [resume by op, applied]" in wide[out.index(rows[4])]
    assert await cli("--room", room, "diff", a, b, "--json") == 0
    found = TurnDiff.model_validate_json(capsys.readouterr().out)
    assert (found.a.turn_id, found.b.turn_id) == (a, b)
    assert [r.mark for r in found.rows] == [
        "same", "same", "changed", "only_b", "same", "changed", "changed"]  # fmt: skip


async def test_while_the_owner_runs_hostile_text_is_drawn_flat_and_unknown_turns_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    async with runtime(tmp_path, echo, tools=[add, shell], kind="run") as rt:
        one = (await rt.run_turn(msg(HOSTILE, "x"))).turn_id
        two = (await rt.run_turn(msg("calm", "y"))).turn_id
        room = str(rt.room.path)
        capsys.readouterr()
        assert await cli("--room", room, "diff", one, two) == 0  # the owner runs meanwhile
        out = capsys.readouterr().out
        assert all(c.isprintable() for line in out.splitlines() for c in line)
        assert "red  [31mtext [0m evil  and a second line" in out
        assert await cli("--room", room, "diff", one, "t404") == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and "no turn t404" in err[0]
    assert await cli("--room", room, "diff", "nope", two) == 2  # and nobody owns it
    assert "no turn nope" in capsys.readouterr().err
    assert original  # (the scripts this module shares)
