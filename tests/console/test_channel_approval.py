"""The issue's end to end in the console, for each kind of channel: a message becomes a
turn whose `shell` call waits; the operator approves it in the decision queue; the answer
reaches the service (loopback stand-ins written from each service's wire format):
Telegram's `sendMessage`, Slack's `chat.postMessage` in the event's thread, the webhook's
signed POST with its Idempotency-Key."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.widgets.decision_queue import DecisionQueue
from tests.console.helpers import SIZE, started, until
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import slack_headers, webhook_headers
from tests.standins.slack import SlackStandin
from tests.standins.telegram import TelegramStandin

pytestmark = pytest.mark.anyio
TOKEN = "123456:console-test-token-AAAA"
SIGNING = "slack-signing-secret-0123456789"
BOT = "xoxb-console-bot-token-0123456789"
HOOK = "webhook-secret-0123456789"
COMMAND = "echo approved in the console"


async def approve_in_console(pilot: Any, thread: str, sent: Callable[[], list]) -> None:
    """Wait for the call in the queue, check nothing was sent yet, approve it with `a`."""
    main = await started(pilot)
    await until(pilot, lambda: len(main.state.pending) == 1, "the call waits")
    [call] = main.state.pending.values()
    assert call.thread_id == thread
    assert str(call.args["command"]) == COMMAND
    assert sent() == []  # nothing leaves before the operator decides
    main.query_one(DecisionQueue).focus()
    await pilot.pause()
    await pilot.press("a")


async def test_telegram(deck_app, room: Path, monkeypatch) -> None:
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    async with running(bot) as url:
        room.mkdir(parents=True)
        (room / "channels.toml").write_text(
            f'[tg]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\napi_url = "{url}"\npoll_timeout = 1\n'
        )
        async with deck_app().run_test(size=SIZE) as pilot:
            bot.message(42, f"run `{COMMAND}`", user="ann")
            await approve_in_console(pilot, "telegram:42", lambda: bot.sent)
            await until(pilot, lambda: bot.sent, "the answer reached Telegram")
            assert bot.sent[0]["chat_id"] in (42, "42")
            assert "approved in the console" in bot.sent[0]["text"]


async def hooked_console(deck_app, room: Path, toml: str):  # noqa: ANN201
    room.mkdir(parents=True)
    (room / "hooks.toml").write_text('listen = "127.0.0.1:0"\n' + toml)
    return deck_app()


async def hook_address(pilot: Any, app: Any) -> str:
    """Where the hosted room's hook listener is bound (port 0: chosen by the system)."""
    await started(pilot)
    runtime = app.host.runtime
    # (the loops start once the first screen is drawn: `channels` is None until then)
    await until(pilot, lambda: runtime.channels and runtime.channels.hook_address,
                "the hooks are served")  # fmt: skip
    return f"http://{runtime.channels.hook_address}"


async def test_slack(deck_app, room: Path, monkeypatch) -> None:
    monkeypatch.setenv("SLACK_SIGNING", SIGNING)
    monkeypatch.setenv("SLACK_BOT", BOT)
    slack = SlackStandin(BOT)
    async with running(slack) as url:
        app = await hooked_console(deck_app, room, (
            '[team]\nkind = "slack"\nsigning_secret_env = "SLACK_SIGNING"\n'
            f'token_env = "SLACK_BOT"\napi_url = "{url}/api"\n'))  # fmt: skip
        async with app.run_test(size=SIZE) as pilot, httpx.AsyncClient() as http:
            base = await hook_address(pilot, app)
            body = json.dumps({"type": "event_callback", "event_id": "Ev1", "event": {
                "type": "message", "channel": "C1", "user": "U1", "text": f"run `{COMMAND}`",
                "ts": "1700000000.000100"}}).encode()  # fmt: skip
            answer = await http.post(f"{base}/hooks/team", content=body,
                                     headers=slack_headers(SIGNING, body, int(time.time())))  # fmt: skip
            assert answer.status_code == 200
            await approve_in_console(pilot, "slack:C1:1700000000.000100", lambda: slack.posts)
            await until(pilot, lambda: slack.posts, "the answer reached Slack")
            assert slack.posts[0]["channel"] == "C1"
            assert slack.posts[0]["thread_ts"] == "1700000000.000100"
            assert "approved in the console" in slack.posts[0]["text"]


async def test_webhook(deck_app, room: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", HOOK)
    receiver = Receiver(HOOK)
    async with running(receiver) as url:
        app = await hooked_console(deck_app, room, (
            '[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\ntext = "comment.body"\n'
            f'thread = "issue.number"\ndeliver_url = "{url}/hook"\n'))  # fmt: skip
        async with app.run_test(size=SIZE) as pilot, httpx.AsyncClient() as http:
            base = await hook_address(pilot, app)
            body = json.dumps({"comment": {"body": f"run `{COMMAND}`"},
                               "issue": {"number": 7}}).encode()  # fmt: skip
            answer = await http.post(f"{base}/hooks/gh", content=body,
                                     headers=webhook_headers(HOOK, body, "d-7"))  # fmt: skip
            assert answer.status_code == 202
            await approve_in_console(pilot, "webhook:gh:7", lambda: receiver.received)
            await until(pilot, lambda: receiver.received, "the answer reached the webhook")
            got = receiver.received[0]
            assert got.signed
            assert "approved in the console" in json.loads(got.body)["text"]
