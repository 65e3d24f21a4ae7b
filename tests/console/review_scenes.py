"""A room a crash left with a call under review, made the same way each time, and the
review screen's scene (snapshot and screenshot).

`prepare_review` runs a real runtime (fixed clock and ids) on a scratch room until its
approved `write_file` call is running (its tool has written half the file and waits),
then copies execution.db as it stands (SQLite's backup: what was committed) and the
workspace into `room`: the room as a SIGKILL at that moment leaves it. The console that
opens it repairs it as after a crash: the call is put up for review.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools import ToolContext
from engine.tools.builtin import builtin_tools
from tests.console.conftest import T0
from tests.console.helpers import started, until
from tests.wait import PATIENCE

ASK = 'write "release notes for v2" to NOTES.md'
CRASH_AT = T0 - 300  # the dead run's clock: five minutes before the console's


def prepare_review(room: Path) -> None:
    """Fill `room` as a crash mid-`write_file` leaves it (see the module's docstring)."""
    anyio.run(_prepare, room)


async def _prepare(room: Path) -> None:
    entered = anyio.Event()

    async def half_written(path: str, text: str, ctx: ToolContext) -> dict[str, Any]:
        (ctx.workspace / path).write_text(text[: len(text) // 2])
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    tools = [replace(t, fn=half_written) if t.name == "write_file" else t
             for t in builtin_tools()]  # fmt: skip
    count = itertools.count(1)
    with tempfile.TemporaryDirectory() as tmp:
        live = Path(tmp) / "room"
        async with Runtime.open(live, kind="invoke", provider=OfflineModel(delay=0), tools=tools,
                                clock=lambda: CRASH_AT,
                                ids=lambda p: f"{p}_dead{next(count):02d}") as rt:  # fmt: skip
            out = await rt.run_turn(Message(origin="chat", channel="console", sender="operator",
                                            thread_id="chat:main", text=ASK))  # fmt: skip
            [call] = await rt.pending()
            await rt.decide(Decision.approve(call.call_id, seen=call.args))
            with anyio.fail_after(PATIENCE):
                await entered.wait()
            room.mkdir(parents=True, exist_ok=True)
            with (closing(sqlite3.connect(live / "execution.db")) as src,
                  closing(sqlite3.connect(room / "execution.db")) as dst):  # fmt: skip
                src.backup(dst)
            (room / "workspace").mkdir(exist_ok=True)
            for f in (live / "workspace").iterdir():
                (room / "workspace" / f.name).write_bytes(f.read_bytes())
            assert out.status == "waiting"  # (leaving ends the scratch room's run)


async def under_review(pilot: Pilot) -> None:
    """The console has put the crashed call up for review."""
    main = await started(pilot)
    await until(pilot, lambda: any(c.error and "outcome unknown" in c.error
                                   for c in main.state.pending.values()), "a call under review")  # fmt: skip


async def review(pilot: Pilot) -> None:
    from tests.console.scenes import steady

    await under_review(pilot)
    await pilot.press("escape", "exclamation_mark")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "ReviewScreen", "review")
    await until(pilot, lambda: pilot.app.screen.loaded, "the reviews are read")  # type: ignore[attr-defined]
    await steady(pilot)
