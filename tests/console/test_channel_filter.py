"""A channel message read back from the room says who sent it and through which channel
("ann via tg"), as the live chat does; the timeline's channel filter (ctrl+l) shows only
the steps of turns from one channel, says which in its title, and Esc clears it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

from console.commands import DeckCommands
from console.groups import channel_filters, next_channel
from console.screens.help import HelpScreen
from console.screens.main import MainScreen
from console.widgets.chat_log import ChatLog
from console.widgets.chat_pane import ChatPane
from console.widgets.timeline import Timeline
from engine.api.local import LocalClient
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from tests.console.conftest import build
from tests.console.helpers import SIZE, palette, started, until
from tests.helpers import runtime

TG = "telegram:7"
HOOK = "webhook:gh:12"


def said(thread_id: str, text: str, channel: str, sender: str) -> Message:
    return Message(origin="chat", channel=channel, sender=sender, thread_id=thread_id, text=text)


async def history(tmp_path: Path) -> None:
    """A room with a turn from Telegram, one from a webhook and one from the console."""
    async with runtime(tmp_path, OfflineModel(delay=0)) as rt:
        await rt.run_turn(said(TG, "hi from the chat", "tg", "ann"))
        await rt.run_turn(said(HOOK, "issue opened", "gh", "octo"))
        await rt.run_turn(said("chat:main", "and from here", "console", "operator"))
        conv = await LocalClient(rt).conversation(TG, 50)  # what the console reads
        first, *rest = conv.messages
        assert (first.role, first.channel, first.sender) == ("user", "tg", "ann")
        assert rest and all(m.channel is None and m.sender == "" for m in rest)
        recent = await LocalClient(rt).recent()
        assert {(t.thread_id, t.channel, t.sender) for t in recent.turns} == {
            (TG, "tg", "ann"), (HOOK, "gh", "octo"), ("chat:main", "console", "operator"),
        }  # fmt: skip
        assert {s.channel for s in recent.steps} == {"tg", "gh", "console"}


def shown(log: ChatLog) -> str:
    """The chat's lines on screen, as text."""
    return " ".join(log.render_line(y).text for y in range(log.size.height))


def labels(main: MainScreen) -> list[tuple[str, str]]:
    return [(e.role, e.via) for e in main.state.thread(main.thread_id).entries]


@pytest.mark.anyio
async def test_a_channel_message_read_back_says_its_sender_and_channel(
    tmp_path: Path, room: Path
) -> None:
    await history(tmp_path)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:  # the console opened again on the room
        main = await started(pilot)
        await main.switch_thread(TG)
        await pilot.pause()
        assert labels(main)[0] == ("user", "ann via tg")
        assert all(via == "" for _, via in labels(main)[1:])
        log = main.query_one(ChatLog)
        await until(pilot, lambda: "ann via tg › hi from the chat" in shown(log), "drawn",
                    seen=lambda: f"{main.thread_id}: {shown(log)!r}")  # fmt: skip
        await main.switch_thread("chat:main")  # the console's own message says "you"
        await pilot.pause()
        assert labels(main)[0] == ("user", "")
        await until(pilot, lambda: "you › and from here" in shown(log), "drawn")
        await app.shutdown()


def test_channel_filters_cycle_through_all_the_console_and_each_channel_seen() -> None:
    filters = channel_filters(["tg", None, "console", "gh", "tg"])
    assert filters == ["", "console", "gh", "tg"]
    assert [next_channel(c, filters) for c in filters] == ["console", "gh", "tg", ""]
    assert next_channel("slack", filters) == ""  # no longer seen: back to all


@pytest.mark.anyio
async def test_the_timeline_filters_by_channel(tmp_path: Path, room: Path) -> None:
    await history(tmp_path)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        timeline = main.query_one(Timeline)
        pane = main.query_one("#timeline-pane")
        assert {r.thread_id for r in timeline.rows} == {TG, HOOK, "chat:main"}
        timeline.focus()
        seen = {}
        for _ in range(4):  # all -> console -> gh -> tg -> all
            await pilot.press("ctrl+l")
            await pilot.pause()
            seen[timeline.channel] = ({r.thread_id for r in timeline.rows}, pane.border_title)
        assert seen == {
            "console": ({"chat:main"}, "Timeline · via console"),
            "gh": ({HOOK}, "Timeline · via gh"),
            "tg": ({TG}, "Timeline · via tg"),
            "": ({TG, HOOK, "chat:main"}, "Timeline"),
        }
        await pilot.press("ctrl+l", "ctrl+l", "ctrl+l")
        await pilot.pause()
        assert timeline.channel == "tg" and {r.thread_id for r in timeline.rows} == {TG}
        await pilot.press("escape")  # clears it
        await pilot.pause()
        assert timeline.channel == "" and pane.border_title == "Timeline"
        assert {r.thread_id for r in timeline.rows} == {TG, HOOK, "chat:main"}
        main.filters.group("chat")  # with a group filter, the title says both
        main.filters.channel("gh")
        await pilot.pause()
        assert pane.border_title == "Timeline · chat · via gh"
        assert {r.thread_id for r in timeline.rows} == {HOOK}
        offered = await palette(DeckCommands(main))
        assert {"Filter timeline by channel: all", "Filter timeline by channel: console",
                "Filter timeline by channel: tg", "Channel filter"} <= set(offered)  # fmt: skip
        offered["Filter timeline by channel: tg"]()
        await pilot.pause()
        assert {r.thread_id for r in timeline.rows} == {TG}
        await app.shutdown()


@pytest.mark.anyio
async def test_the_help_names_the_channel_filter(tmp_path: Path, room: Path) -> None:
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        assert ("^l", "Channel filter") in app.screen.rows  # type: ignore[attr-defined]
        await app.shutdown()


@pytest.mark.anyio
async def test_a_thread_switched_to_while_an_earlier_one_loads_stays_shown(
    tmp_path: Path, room: Path
) -> None:
    """The last thread chosen is the one shown: a slower read of an earlier one (the
    thread the console opens at start, still loading) must not draw over it. (Under load
    the chat showed chat:main after a switch to the Telegram thread.)"""
    await history(tmp_path)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        client = main.bridge.client
        assert client is not None
        read = client.conversation
        entered, gate = anyio.Event(), anyio.Event()

        async def slow_for_main(thread_id: str, limit: int) -> Any:
            if thread_id == "chat:main":
                entered.set()
                await gate.wait()
            return await read(thread_id, limit)

        client.conversation = slow_for_main  # type: ignore[method-assign]
        main.state.thread("chat:main").loaded = False  # read it again, slowly
        earlier = asyncio.ensure_future(main._show_thread("chat:main"))
        await entered.wait()
        await main.switch_thread(TG)  # chosen while chat:main still loads
        gate.set()
        await earlier
        await pilot.pause()
        pane, log = main.query_one(ChatPane), main.query_one(ChatLog)
        assert (main.thread_id, pane.thread_id) == (TG, TG)
        await until(pilot, lambda: "ann via tg › hi from the chat" in shown(log), "drawn")
        await app.shutdown()
