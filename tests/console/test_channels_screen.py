"""The channels screen (`l`: loops and channels with their states, the outbound deliveries,
retry and drop of a dead one after a confirmation whose default is No) and the rooms
overview (`o`: every room on the bus), in a console hosting the room (issue 17).

Answers owed to a channel the room does not configure are dead at their first try ("not
configured any more", a permanent failure): the dead deliveries these tests act on.
"""

from __future__ import annotations

import inspect
import os

import pytest
from textual.notifications import Notify
from textual.pilot import Pilot

from console.commands import DeckCommands
from console.screens.channels import ChannelsScreen
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.screens.rooms import RoomsScreen
from console.state import DeckState
from console.widgets.channel_tables import DeliveriesTable, LoopsTable
from console.widgets.rooms_table import RoomsTable
from engine.domain.events import DeliveryChanged, MessageAppended, TurnStarted
from engine.store.outbox import answer_owed
from tests.console.conftest import T0, build
from tests.console.helpers import SIZE, Recorder, palette, started, told, until
from tests.console.scenes import steady
from tests.helpers import room_rows

pytestmark = pytest.mark.anyio


async def owe(pilot: Pilot, n: int) -> None:
    """`n` answers owed to channel `tg` (not configured): each is dead at its first try."""
    rt = pilot.app.host.runtime  # type: ignore[attr-defined]
    for i in range(1, n + 1):
        op, event = answer_owed(f"t_{i:03d}", f"telegram:{40 + i}", "tg", {"chat_id": 40 + i},
                                f"answer number {i}", T0)  # fmt: skip
        await rt.commit([op], [event], checkpoint=None, turn_id=f"t_{i:03d}")
    await until(pilot, lambda: _dead(pilot) == n, "dead")


def _dead(pilot: Pilot) -> int:
    room = pilot.app.host.runtime.room.path  # type: ignore[attr-defined]
    return room_rows(room, "SELECT count(*) FROM outbox WHERE state='dead'")[0][0]


async def open_channels(pilot: Pilot) -> ChannelsScreen:
    """Press `l` (from the timeline: the chat input would take the letter)."""
    app = pilot.app
    app.main.query_one("#timeline").focus()  # type: ignore[attr-defined]
    await pilot.press("l")
    await until(pilot, lambda: isinstance(app.screen, ChannelsScreen), "channels screen")
    screen = app.screen
    assert isinstance(screen, ChannelsScreen)
    await until(pilot, lambda: screen.readings > 0, "first reading")
    return screen


async def test_dead_deliveries_are_retried_or_dropped_after_asking(room) -> None:
    rec = Recorder(Notify)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        await owe(pilot, 2)
        screen = await open_channels(pilot)
        loops = screen.query_one(LoopsTable)
        await until(pilot, lambda: "server:server" in loops.rows, "loops listed")
        assert loops.get_row("pulse:pulse")[4].plain.endswith("up")  # type: ignore[union-attr]
        table = screen.query_one(DeliveriesTable)
        await until(pilot, lambda: list(table.deliveries) == ["2", "1"], "deliveries listed")
        assert [str(c) for c in table.get_row("2")[2:5]] == ["tg", "telegram:42", "t_002"]
        assert "not configured" in table.deliveries["2"].last_error  # type: ignore[operator]
        # retry: asks, No is the default (Enter on the focused No)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen, "back")
        assert room_rows(room, "SELECT count(*) FROM outbox WHERE state='dead'") == [(2,)]
        # then yes: tried afresh (and dead again: the channel is still not configured)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: any(t.startswith("Delivery 2:") for t in told(rec)), "told")
        # drop the other: asked, then marked dropped, and the table shows it
        await pilot.press("j", "x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked to drop")
        await pilot.press("y")
        await until(pilot, lambda: table.deliveries["1"].state == "dropped", "dropped shown")
        assert room_rows(room, "SELECT state FROM outbox WHERE id=1") == [("dropped",)]
        # a dropped one cannot be dropped again: said, nothing asked
        await pilot.press("x")
        await until(pilot, lambda: any("only a dead or retrying" in t for t in told(rec)), "no")
        assert not isinstance(app.screen, ConfirmScreen)
        # the rooms overview, from the channels screen: this room, which this console serves
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, RoomsScreen), "rooms")
        rooms = app.screen.query_one(RoomsTable)

        def first_row() -> list[str]:
            return [str(c) for c in rooms.get_row_at(0)] if rooms.row_count else []

        row = await until(pilot, first_row, "this room listed, served",
                          ok=lambda r: len(r) > 1 and "serving" in r[1])  # fmt: skip
        assert row[0] == "room (here)" and row[2:4] == ["console", str(os.getpid())]
        await pilot.press("escape", "escape")
        await until(pilot, lambda: app.screen is app.main, "closed")
        await app.shutdown()


async def test_the_channels_screens_are_in_the_palette_and_the_help(room) -> None:
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        titles = await palette(DeckCommands(app.main))
        assert "Channels" in titles and "Rooms and their inbox" in titles
        if inspect.isawaitable(opened := titles["Channels"]()):
            await opened
        await until(pilot, lambda: isinstance(app.screen, ChannelsScreen), "opened")
        await until(pilot, lambda: app.screen.readings > 0, "read")
        offered = await palette(DeckCommands(app.screen))
        assert "Deliveries: Retry delivery" in offered and "Close channels" in offered
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        rows = app.screen.rows
        assert ("l", "Channels") in rows and ("o", "Rooms and their inbox") in rows
        assert ("o", "Rooms on this machine") in rows  # (the channels screen's own)
        assert ("", "Channels") in rows and ("x / del", "Drop delivery") in rows
        await app.shutdown()


def test_a_delivery_change_asks_the_channels_screen_to_read_again() -> None:
    ch = DeckState().fold([DeliveryChanged(at=T0, thread_id="telegram:1", turn_id="t_1",
                                           channel="tg", key="t_1", state="dead")])  # fmt: skip
    assert ch and ch.deliveries == 1


def test_a_channel_message_shows_its_sender_and_channel_in_the_chat() -> None:
    state = DeckState()
    state.show_thread("telegram:7").loaded = True
    state.fold([
        TurnStarted(at=T0, thread_id="telegram:7", turn_id="t_1", origin="chat", sender="ann",
                    text="hi", channel="tg"),
        MessageAppended(at=T0, thread_id="telegram:7", turn_id="t_1", role="user", text="hi"),
        MessageAppended(at=T0, thread_id="telegram:7", turn_id="t_1", role="assistant",
                        text="hello"),
        TurnStarted(at=T0, thread_id="telegram:7", turn_id="t_2", origin="invoke", sender="api",
                    text="again"),
        MessageAppended(at=T0, thread_id="telegram:7", turn_id="t_2", role="user", text="again"),
    ])  # fmt: skip
    entries = state.thread("telegram:7").entries
    assert [(e.role, e.via) for e in entries] == [
        ("user", "ann via tg"), ("assistant", ""), ("user", "")]  # fmt: skip
    assert state.turns["t_1"].channel == "tg" and state.turns["t_2"].channel is None


async def channels_scene(pilot: Pilot) -> None:
    await started(pilot)
    await owe(pilot, 3)
    await until(pilot, lambda: pilot.app.host.runtime.api, "API served")  # type: ignore[attr-defined]
    screen = await open_channels(pilot)
    table = screen.query_one(DeliveriesTable)
    loops = screen.query_one(LoopsTable)
    await until(pilot, lambda: len(table.deliveries) == 3 and loops.row_count == 2, "listed")
    await steady(pilot)  # (the tables sized, and drawn afresh)


def test_channels_snapshot(snap_compare, room) -> None:
    assert snap_compare(build(room), terminal_size=SIZE, run_before=channels_scene)
