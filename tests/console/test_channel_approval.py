"""The issue's end to end in the console: a Telegram message becomes a turn whose `shell`
call waits; the operator approves it in the decision queue; the answer reaches the chat
through `sendMessage` (the Bot API's stand-in on loopback)."""

from __future__ import annotations

import anyio
import pytest

from console.widgets.decision_queue import DecisionQueue
from tests.console.helpers import SIZE, started, until
from tests.standins import running
from tests.standins.telegram import TelegramStandin

pytestmark = pytest.mark.anyio
TOKEN = "123456:console-test-token-AAAA"


async def test_a_telegram_call_approved_in_the_console_answers_the_chat(
    deck_app, room, monkeypatch
) -> None:
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    async with running(bot) as url:
        room.mkdir(parents=True)
        (room / "channels.toml").write_text(
            f'[tg]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\napi_url = "{url}"\npoll_timeout = 1\n'
        )
        app = deck_app()
        async with app.run_test(size=SIZE) as pilot:
            main = await started(pilot)
            bot.message(42, "run `echo approved in the console`", user="ann")
            await until(pilot, lambda: len(main.state.pending) == 1, "the call waits")
            [call] = main.state.pending.values()
            assert call.thread_id == "telegram:42"
            assert str(call.args["command"]) == "echo approved in the console"
            assert bot.sent == []  # nothing leaves before the operator decides
            main.query_one(DecisionQueue).focus()
            await pilot.pause()
            await pilot.press("a")
            with anyio.fail_after(15):
                while not bot.sent:
                    await pilot.pause(0.05)
            assert bot.sent[0]["chat_id"] in (42, "42")
            assert "approved in the console" in bot.sent[0]["text"]
