"""`agentdeck audit` (issue 36), run in this process: JSON lines, CSV and a table from a
room nobody owns (read without a run) and through its owner's API alike; times and
positions an operator writes, and bad ones refused with exit 2 and one line; CSV that
keeps a line break inside its field and a formula behind an apostrophe."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.local import LocalClient
from engine.api.remote import RemoteClient
from engine.cli import main
from engine.cli.audit import table
from engine.domain.audit import (
    CSV_FIELDS,
    AuditEntry,
    AuditError,
    csv_text,
    cursor,
    parse_cursor,
    parse_when,
)
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.tools.builtin import builtin_tools
from tests.helpers import room_rows, runtime
from tests.test_audit import T0, everything, scripted_room

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


async def cli(*argv: str) -> int:
    """`agentdeck ARGV` in a thread (it runs an event loop of its own)."""
    return await anyio.to_thread.run_sync(main, list(argv))


async def test_the_command_prints_every_entry_from_a_free_room_and_through_its_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_room(tmp_path) as rt:
        whole = await everything(LocalClient(rt))
    room = str(tmp_path / "room")
    runs = room_rows(tmp_path / "room", "SELECT count(*) FROM runs")
    capsys.readouterr()
    assert await cli("--room", room, "audit") == 0  # not a terminal: JSON lines
    printed = [AuditEntry.model_validate(json.loads(line))
               for line in capsys.readouterr().out.splitlines()]  # fmt: skip
    assert printed == whole
    assert room_rows(tmp_path / "room", "SELECT count(*) FROM runs") == runs  # read, not run
    # through the owner's API: the same lines
    carried: list[str] = []
    carry = RemoteClient.carry

    async def counted(self: RemoteClient, op: Any, arguments: dict[str, Any]) -> Any:
        carried.append(op.name)
        return await carry(self, op, arguments)

    monkeypatch.setattr(RemoteClient, "carry", counted)
    model = OfflineModel()
    async with runtime(tmp_path, model, builtin_tools(), kind="run", first_id=100) as rt, \
            serve_api(rt):  # fmt: skip
        assert await cli("--room", room, "audit") == 0
    assert carried.count("audit") == 1  # (after `info`, asked as it connects)
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        e.model_dump(mode="json") for e in whole]  # fmt: skip


async def test_csv_and_the_table_and_the_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with scripted_room(tmp_path):
        pass
    room = str(tmp_path / "room")
    capsys.readouterr()
    assert await cli("--room", room, "audit", "--format", "csv") == 0
    got = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))
    assert got[0] == list(CSV_FIELDS) and len(got) == 14
    reasons = [row[CSV_FIELDS.index("reason")] for row in got[1:]]
    assert "'=no\nnever \x1b[31mred" in reasons  # one field: its line break inside, defused
    assert all(row[0].endswith("Z") and row[0].startswith("2027-01-15T") for row in got[1:])
    assert await cli("--room", room, "audit", "--format", "table") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("when") and len(lines) == 14
    assert all(line.isprintable() for line in lines)
    assert any(" agentdeck.toml rule " in line and " deny " in line for line in lines)
    # the filters: a time as ISO (local time) or an age, a thread, who, a kind
    after_t0 = datetime.fromtimestamp(T0 + 1).isoformat()
    assert await cli("--room", room, "audit", "--since", after_t0) == 0
    [late] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert late["decided_by"] == "deadline" and late["thread_id"] == "d"
    assert await cli("--room", room, "audit", "--kind", "rule", "--format", "csv") == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    assert await cli("--room", room, "audit", "--decided-by", "rule 1", "--thread", "b") == 0
    [one] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (one["kind"], one["action"]) == ("rule", "allow")
    assert await cli("--room", room, "audit", "--after", one["cursor"], "--kind", "rule") == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # the two after it
    assert await cli("--room", room, "audit", "--thread", "nobody") == 0
    out = capsys.readouterr()
    assert out.out == "" and "no decisions match" in out.err


@pytest.mark.parametrize(("argv", "says"), [
    (["--since", "yesterday"], "--since: bad time 'yesterday'"),
    (["--since", "2026-13-01"], "--since: bad time"),
    (["--since", "9" * 400 + "d"], "--since: bad time"),
    (["--since", ""], "--since: bad time"),
    (["--after", "12:00"], "--after: bad cursor"),
    (["--after", "inf:decision:d_1"], "--after: bad cursor"),
    (["--thread", ""], "--thread: give a value"),
    (["--kind", "rules"], "invalid choice"),
    (["--format", "xml"], "invalid choice"),
    (["--room", "/nonexistent/room"], "no room at /nonexistent/room"),
])  # fmt: skip
async def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    room = tmp_path / "room"
    room.mkdir()
    try:
        code = await cli("--room", str(room), "audit", *argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err


@pytest.mark.one_store("no store: the formats alone")
def test_times_positions_and_csv_cells() -> None:
    now = 1_800_000_000.0
    assert parse_when("2h", now) == now - 7200 and parse_when(" 90s ", now) == now - 90
    assert parse_when("1.5d", now) == now - 1.5 * 86400 and parse_when("1W", now) == now - 604800
    assert parse_when("2026-01-31T14:00:00Z") == 1769868000.0
    assert parse_when("2026-01-31T16:00+02:00") == 1769868000.0
    assert parse_when("2026-01-31") == datetime(2026, 1, 31).timestamp()  # local midnight
    for bad in ("", "2h ago", "-2h", "31/01/2026", "2026-02-30", "1e400d", "nan", "\x00"):
        with pytest.raises(AuditError, match="bad time"):
            parse_when(bad, now)
    at = 1_800_000_000.123456789
    assert parse_cursor(cursor(at, "d_1:x", "decision")) == (at, "d_1:x", "decision")
    for bad in ("", "1.0", "1.0:rules:x", "x:rule:c1", "nan:rule:c1", "-inf:rule:c1"):
        with pytest.raises(AuditError, match="bad cursor"):
            parse_cursor(bad)
    entry = AuditEntry(kind="decision", decided_by="@ops", recorded_at=0.0, call_id="=1+1",
                       action="cancel", status="applied", reason="-rf\r\n\x00x",
                       note="+ok", pattern="\tcmd", cursor="0.0:decision:d")  # fmt: skip
    [header, row] = list(csv.reader(io.StringIO(csv_text([entry], header=True), newline="")))
    cells = dict(zip(header, row, strict=True))
    assert (cells["decided_by"], cells["call_id"], cells["reason"], cells["note"],
            cells["pattern"]) == ("'@ops", "'=1+1", "'-rf\r\n\x00x", "'+ok", "'\tcmd")  # fmt: skip
    assert (cells["recorded_at"], cells["applied_at"], cells["edited"]) == (
        "1970-01-01T00:00:00.000000Z", "", "false")  # fmt: skip
    assert csv_text([entry]).count('"') % 2 == 0 and csv_text([entry]).endswith("\r\n")
    [line] = table([entry])
    assert line.isprintable() and "-rf  x; +ok" in line
