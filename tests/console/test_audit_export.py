"""The decision audit from the console (issue 36): on the history screen E, or the
palette's "History: Export decision audit", writes every decision of the room through the
runtime's client (never the store) as JSON lines in the room's exports/ folder, says where,
and a second export in the same second gets a name of its own; with no runtime reachable
it says so instead."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from textual.notifications import Notify

from console.commands import DeckCommands
from console.screens.history import HistoryScreen
from engine.api.local import LocalClient
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, palette, told, until
from tests.console.history_scenes import open_history
from tests.history_seed import seed

pytestmark = pytest.mark.anyio


async def test_e_and_the_palette_export_the_rooms_decision_audit(
    room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed(room, bulk=0)
    asked: list[object] = []
    audit = LocalClient.audit

    async def through_the_client(self: LocalClient, **kw: object) -> object:
        asked.append(kw.get("after"))
        return await audit(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(LocalClient, "audit", through_the_client)
    rec = Recorder(HistoryScreen.AuditExported, Notify)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        await pilot.press("E")
        await until(pilot, lambda: rec.of(HistoryScreen.AuditExported), "exported")
        path = rec.of(HistoryScreen.AuditExported)[0].path
        assert path == room / "exports" / "audit-20260101-120000.jsonl"  # the app's clock, UTC
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        assert [(e["kind"], e["decision_id"], e["decided_by"], e["action"], e["status"])
                for e in entries] == [("decision", "d1", "bob", "cancel", "applied"),
                                      ("decision", "d2", "alice", "resume", "applied")]  # fmt: skip
        assert entries[1]["edited"] and entries[0]["reason"] == "not on prod"
        assert asked == [None]  # one page, read through the runtime's client
        assert path.stat().st_mode & 0o777 == 0o600
        assert any(f"(2 entries) written to {path}" in n for n in told(rec))
        # the palette offers it while the history is shown; the same second: another name
        offered = await palette(DeckCommands(screen))
        assert "History: Export decision audit" in offered
        if inspect.isawaitable(ran := offered["History: Export decision audit"]()):
            await ran
        await until(pilot, lambda: len(rec.of(HistoryScreen.AuditExported)) == 2, "again")
        again = rec.of(HistoryScreen.AuditExported)[1].path
        assert again.name == "audit-20260101-120000-2.jsonl"
        assert again.read_text() == path.read_text()
        await app.shutdown()


async def test_without_a_runtime_the_export_says_so(room: Path) -> None:
    await seed(room, bulk=0)
    rec = Recorder(HistoryScreen.AuditExported, Notify)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        screen.bridge = None  # (as a history screen opened with no runtime reachable)
        await pilot.press("E")
        await until(pilot, lambda: told(rec, "error"), "said")
        [said] = told(rec, "error")
        assert "Exporting the decision audit failed: no runtime is reachable" in said
        assert not rec.of(HistoryScreen.AuditExported) and not (room / "exports").exists()
        await app.shutdown()
