"""Which thread a console opens on: the chat, or the thread this operator last showed in
this room; never the room's busiest thread (a task's) by chance."""

from __future__ import annotations

import pytest

from console.widgets.chat_pane import ChatPane
from tests.console.helpers import SIZE, started, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]


async def test_a_console_opens_on_the_chat_or_the_thread_it_last_showed(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await main.bridge.send("task:nightly", "what time is it")  # the room's newest thread
        await until(pilot, lambda: "task:nightly" in main.state.recent_threads, "task thread")
        await app.shutdown()
    app = deck_app(ids=lambda prefix: f"{prefix}_second")  # (ids of its own: a new run)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        assert main.thread_id == "chat:main"  # not the task's thread
        await pilot.press("ctrl+n")  # chat:2
        await until(pilot, lambda: main.query_one(ChatPane).thread_id == "chat:2", "chat:2")
        await app.shutdown()
    app = deck_app(ids=lambda prefix: f"{prefix}_third")
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        assert main.thread_id == "chat:2"  # where this operator left it
        await app.shutdown()


async def test_the_timeline_keeps_following_after_a_resize(deck_app) -> None:
    from console.widgets.timeline import Timeline

    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        for n in range(6):
            await main.bridge.send("chat:main", f"calc {n}+1")
            await until(pilot, lambda n=n: len(main.state.turns) == n + 1
                        and main.state.counts() == (0, 0), f"turn {n} done")  # fmt: skip
        timeline = main.query_one(Timeline)
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: main.has_class("-narrow"), "narrow")
        await pilot.pause()
        height = timeline.scrollable_content_region.height
        rows = len(timeline._rows)
        assert rows > height, "more steps than the narrow timeline shows"
        assert timeline.follow and int(timeline.scroll_y) == rows - height  # the newest shows
        await app.shutdown()
