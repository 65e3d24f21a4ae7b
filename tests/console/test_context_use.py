"""A thread's context in the console (issue 32): the gauge in the chat title, the
status bar's warning near the window, a compaction in the timeline, and K / U to compact
the thread now and undo it."""

from __future__ import annotations

import pytest

from console.context_use import gauge, nearest, thread_context
from console.screens.confirm import ConfirmScreen
from console.state import DeckState
from tests.console.helpers import SIZE, send, started, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]

LONG = "tell me about item {n} with many words so that the context fills up quickly enough"


def test_the_gauge_reads_as_a_share_of_the_window() -> None:
    assert gauge(600, 1500) == "▰▰▱▱▱ 40% of 1.5k"
    assert gauge(1400, 16384) == "▱▱▱▱▱ 9% of 16.4k"
    assert gauge(900, None) == "900 tokens"
    state = DeckState()
    state.context["chat:a"] = (1300, 1500, "offline:offline-rules-1")
    state.context["chat:b"] = (100, 1500, None)
    assert thread_context(state, "chat:a") == "▰▰▰▰▱ 87% of 1.5k · offline-rules-1"
    assert nearest(state) == "chat:a at 87% of its context"


def compactions(main) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for row in main.state.steps if row.kind == "compaction")


async def test_the_context_fills_compacts_and_k_and_u_act_on_it(deck_app, room) -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text("[model]\ncontext_window = 1500\n")
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        chat = main.query_one("ChatPane")
        await send(pilot, LONG.format(n=0), click=False)
        await until(pilot, lambda: chat.border_title, "the gauge in the chat title",
                    ok=lambda title: "% of 1.5k" in str(title))  # fmt: skip
        n = 1
        while not compactions(main):  # the thread fills: the runtime compacts it by itself
            await until(pilot, lambda: main.state.counts(), "idle", ok=lambda c: c == (0, 0))
            await send(pilot, LONG.format(n=n), click=False)
            n += 1
            assert n < 200
        main.query_one("#timeline").focus()
        await pilot.press("ctrl+t")  # the threads list shows each thread's context too
        await until(pilot, lambda: type(app.screen).__name__, "the threads",
                    ok=lambda name: name == "ThreadPickerScreen")  # fmt: skip
        prompt = str(app.screen.query_one("OptionList").get_option_at_index(0).prompt)
        assert "chat:main" in prompt and "% of 1.5k" in prompt
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "back")
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked first")
        await pilot.press("y")
        await until(pilot, lambda: compactions(main), "compacted now", ok=lambda c: c == 2)
        await pilot.press("U")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked first")
        await pilot.press("y")
        await until(pilot, lambda: [t.text for t in main.state.turns.values()][-1:],
                    "the undo ran", ok=lambda last: last == ["undo the last compaction"])  # fmt: skip
        await app.shutdown()


def test_context_snapshot(snap_compare, room) -> None:
    from tests.console.conftest import build
    from tests.console.context_scenes import compacted, small_window

    small_window(room)
    assert snap_compare(build(room), terminal_size=SIZE, run_before=compacted)
