"""The rooms overview and its inbox (issue 38) in this process: three rooms served here
(tests/console/machine_scenes.py), their calls in one inbox, needs input first, decided
from it through each room's own socket; snapshots of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.notifications import Notify

from console.screens.prompt import PromptScreen
from console.widgets.decision_card import DecisionCard
from console.widgets.decision_queue import DecisionQueue
from console.widgets.rooms_table import RoomsTable
from console.widgets.text import Static
from engine import rooms_registry
from engine.domain.decisions import args_digest
from engine.room import Room
from tests.console.conftest import T0, build
from tests.console.helpers import SIZE, Recorder, until
from tests.console.machine_scenes import MACHINE_SCENES, open_rooms, settle, settled
from tests.helpers import room_rows


@pytest.mark.parametrize("scene", list(MACHINE_SCENES))
def test_inbox_snapshot(scene: str, snap_compare, room: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(rooms_registry, "lock_holder", rooms_registry.lock_holder)  # (the scene's)
    run_before, size, kw = MACHINE_SCENES[scene]
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)


def decisions(room: Path) -> list[tuple[str, str, str | None, str]]:
    """A room's decisions: (call, action, args_hash, status), from its own store."""
    return [tuple(r) for r in room_rows(room, "SELECT call_id, action, args_hash, status "
                                              "FROM decisions ORDER BY created_at")]  # fmt: skip


def call_status(room: Path, call_id: str) -> str | None:
    rows = room_rows(room, "SELECT status FROM tool_calls WHERE id=?", call_id)
    return rows[0][0] if rows else None


@pytest.mark.anyio
async def test_one_inbox_decides_each_call_in_its_own_room(
    room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rooms_registry, "lock_holder", rooms_registry.lock_holder)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rooms(pilot)
        await settle(pilot, screen)
        queue = screen.query_one(DecisionQueue)
        alpha, beta = room.parent / "alpha", room.parent / "beta"
        # needs input first: alpha's (a deadline), beta's (waiting longest), then this room's
        rows = [screen._shown[k] for k in queue.rows]  # type: ignore[index]
        assert [(c.thread_id, c.tool) for c in rows] == [
            ("alpha › task:deploy", "shell"), ("beta › task:notes", "write_file"),
            ("room › chat:main", "shell")]  # fmt: skip
        first, second, third = rows
        card = screen.query_one(DecisionCard)
        assert card.call is not None and card.call.call_id == first.call_id
        assert card.workspace == alpha / "workspace"  # its room's, for a diff or a path

        await pilot.press("a")  # approved in alpha, bound to what its row showed
        await until(pilot, lambda: decisions(alpha), "alpha's decision recorded")
        [(call, action, args_hash, _)] = decisions(alpha)
        assert (call, action, args_hash) == (first.call_id, "resume", args_digest(first.args))
        await until(pilot, lambda: call_status(alpha, first.call_id), "alpha's call ran",
                    ok=lambda s: s in ("succeeded", "failed"))  # fmt: skip
        assert decisions(beta) == [] and decisions(room) == []

        await until(pilot, lambda: queue.current_key(), "the cursor goes to beta's call",
                    ok=lambda k: k == second.call_id)  # fmt: skip
        await pilot.press("x")  # denied in beta, with a reason the model reads
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "the reason")
        await pilot.press(*"not now", "enter")
        await until(pilot, lambda: call_status(beta, second.call_id), "beta's call cancelled",
                    ok=lambda s: s == "cancelled")  # fmt: skip
        assert [d[:2] for d in decisions(beta)] == [(second.call_id, "cancel")]

        # this console's own room, from the card: Tab reaches it, its `a` approves
        await until(pilot, lambda: card.call, "the card shows the last call",
                    ok=lambda c: c is not None and c.call_id == third.call_id)  # fmt: skip
        await pilot.press("tab")
        await until(pilot, lambda: card.is_armed(), "the card's keys armed")
        await pilot.press("a")
        await until(pilot, lambda: call_status(room, third.call_id), "this room's call ran",
                    ok=lambda s: s in ("succeeded", "failed"))  # fmt: skip
        assert [d[:3] for d in decisions(room)] == [
            (third.call_id, "resume", args_digest(third.args))]  # fmt: skip
        await until(pilot, lambda: queue.row_count, "the inbox is empty", ok=lambda n: n == 0)
        await until(pilot, lambda: [f.waiting for f in screen.machine.feeds.values()],
                    "every room's counts moved", ok=lambda w: w == [0, 0, 0])  # fmt: skip
        await app.shutdown()


@pytest.mark.anyio
async def test_a_room_alone_a_gone_entry_pruned_and_garbage_left_alone(
    room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rooms_registry, "lock_holder", rooms_registry.lock_holder)
    folder = rooms_registry.folder()
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=(said := Recorder(Notify))) as pilot:
        screen = await open_rooms(pilot)
        await until(pilot, lambda: settled(screen), "three rooms, three calls")
        # Enter on a room: its calls alone; Esc: every room's again
        table = screen.query_one(RoomsTable)
        table.focus()
        table.move_cursor(row=table.get_row_index(str(room.parent / "beta")))
        await pilot.press("enter")
        queue = screen.query_one(DecisionQueue)
        await until(pilot, lambda: queue.row_count, "beta's call alone", ok=lambda n: n == 1)
        assert "beta" in str(screen.query_one("#machine-inbox-pane").border_title)
        await pilot.press("escape")
        await until(pilot, lambda: queue.row_count, "every room's again", ok=lambda n: n == 3)
        assert app.screen is screen
        # a room whose owner died (nobody holds its lock), and files that are no entries
        dead = room.parent / "dead"
        dead.mkdir()
        rooms_registry.register(Room(dead), kind="run", pid=999_999, started_at=T0 - 60)
        (folder / "junk.json").write_text("{not json")
        (folder / "notes.txt").write_text("mine")
        looks = screen.machine.looks
        await until(pilot, lambda: screen.machine.feeds.get(dead), "the dead room listed",
                    ok=lambda f: f is not None and f.owner == "owner gone")  # fmt: skip
        await until(pilot, lambda: screen.machine.looks, "a look after", ok=lambda n: n > looks + 1)
        summary = str(screen.query_one("#machine-summary", Static).render())
        assert "1 owner gone" in summary and "2 unreadable file(s)" in summary, summary
        assert queue.row_count == 3  # the dead room has no calls to show
        await pilot.press("P")
        await until(pilot, lambda: dead not in screen.machine.feeds, "the dead room forgotten")
        assert any("Forgot 1 room" in n.notification.message for n in said.of(Notify))
        assert {p.name for p in folder.iterdir()} >= {"junk.json", "notes.txt"}  # left alone
        await app.shutdown()


@pytest.mark.anyio
async def test_approve_and_remember_reads_a_path_in_the_call_s_own_room(
    room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's pattern for a file tool is checked against the workspace of the call's room, not
    this console's (a path of beta's is inside beta's workspace)."""
    from console.screens.remember import RememberScreen

    monkeypatch.setattr(rooms_registry, "lock_holder", rooms_registry.lock_holder)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rooms(pilot)
        await settle(pilot, screen)
        queue = screen.query_one(DecisionQueue)
        beta = [k for k in queue.rows if screen._shown[k].tool == "write_file"]  # type: ignore[index]
        await pilot.press("down")  # needs input first: alpha's, then beta's
        await until(pilot, lambda: queue.current_key(), "beta's call", ok=lambda k: k == beta[0])
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, RememberScreen), "the remember dialog")
        assert app.screen.workspace == room.parent / "beta" / "workspace"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await app.shutdown()
