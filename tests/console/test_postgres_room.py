"""The console on a room whose store is on PostgreSQL (its agentdeck.toml names the
database, no password: the test server trusts its private socket): a turn finished before
the console opened shows in the timeline and in its thread's chat, and the history screen
lists it; nothing is written to an execution.db."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.widgets.chat_log import ChatLog
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.store.pg.store import PgStore
from tests.console.conftest import build
from tests.console.helpers import SIZE, started, until
from tests.console.history_scenes import listed, open_history, settled
from tests.helpers import runtime
from tests.history_seed import on_store


def shown(log: ChatLog) -> str:
    """The chat's lines on screen, as text."""
    return " ".join(log.render_line(y).text for y in range(log.size.height))


@pytest.mark.anyio
async def test_a_finished_turn_on_postgresql_shows_when_the_console_opens(
    tmp_path: Path, room: Path, pg_url: str
) -> None:
    config = on_store(room, pg_url)
    async with runtime(tmp_path, OfflineModel(delay=0), config=config) as rt:
        assert isinstance(rt.store, PgStore)
        done = await rt.run_turn(Message(origin="chat", channel="console", sender="operator",
                                         thread_id="desk", text="hello from before"))  # fmt: skip
        assert done.status == "done"
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        assert isinstance(app.host.runtime.store, PgStore)  # type: ignore[attr-defined]
        await until(pilot, lambda: any(r.turn_id == done.turn_id for r in main.state.steps),
                    "the stored turn's steps are in the timeline")  # fmt: skip
        assert {r.thread_id for r in main.state.steps} == {"desk"}
        await main.switch_thread("desk")
        await until(pilot, lambda: "hello from before" in shown(main.query_one(ChatLog)),
                    "the stored conversation is in the chat")  # fmt: skip
        roles = [e.role for e in main.state.thread("desk").entries]
        assert roles[:2] == ["user", "assistant"]
        screen = await open_history(pilot)
        await settled(pilot, screen)
        assert done.turn_id in listed(screen)
        await app.shutdown()
    assert not (room / "execution.db").exists()
