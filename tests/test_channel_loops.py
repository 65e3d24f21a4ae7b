"""The hook and poll loops in a running room, end to end against loopback stand-ins.

A Telegram message (polled), a Slack event and a signed webhook delivery (hooked) each
become one turn whose `shell` call waits; approving it ends the turn, and its answer
reaches the service. Retries and redeliveries make no second turn; an unverified delivery
makes none; the poll offset moves only past what is durable.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.channels.config import ChannelConfigError
from engine.domain.decisions import Decision
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.helpers import on, room_bytes, rows
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import slack_headers, webhook_headers
from tests.standins.slack import SlackStandin
from tests.standins.telegram import TelegramStandin
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
TOKEN = "123456:telegram-test-token-AAAA"
SIGNING = "slack-signing-secret-0123456789"
BOT = "xoxb-slack-bot-token-0123456789"
HOOK_SECRET = "webhook-secret-0123456789"


@asynccontextmanager
async def room(tmp_path: Path, files: dict[str, str]) -> AsyncIterator[Runtime]:
    path = tmp_path / "room"
    path.mkdir(exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        start_loops(rt)
        yield rt


async def turns(rt: Runtime, thread: str) -> list[tuple]:
    return list(await on(rt.store).fetchall(
        "SELECT id, status, reason FROM turns WHERE thread_id = ? ORDER BY created_at, id", (thread,)))  # fmt: skip


async def approve_all(rt: Runtime, thread: str) -> str:
    """Approve the thread's waiting call; return its turn's id."""
    rows = await until(lambda: on(rt.store).fetchall(
        "SELECT id, turn_id, args FROM tool_calls WHERE thread_id = ? AND status = 'suspended'",
        (thread,)), f"a call of {thread} waiting for approval")  # fmt: skip
    call_id, turn_id, args = rows[0]
    await rt.decide(Decision.approve(call_id, args=json.loads(args)))
    return turn_id


def telegram_toml(url: str) -> str:
    return f'[tg]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\napi_url = "{url}"\npoll_timeout = 1\n'


async def test_a_telegram_message_becomes_one_turn_and_its_answer_is_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    async with running(bot) as url, room(tmp_path, {"channels.toml": telegram_toml(url)}) as rt:
        update = bot.message(42, "run `echo hello from telegram`")
        await approve_all(rt, "telegram:42")
        await until(lambda: bot.sent, "the answer sent to Telegram")
        assert bot.sent[0]["chat_id"] in (42, "42")
        assert "hello from telegram" in bot.sent[0]["text"]
        [(_, status, reason)] = await turns(rt, "telegram:42")
        assert (status, reason) == ("done", "natural")
        offset = json.loads((rt.room.path / "poll" / "tg.json").read_text())["offset"]
        assert offset == update + 1
        state = rt.channels.states["tg"]
        assert state.state == "up" and state.received == 1
        # each getUpdates asks to be held as long as channels.toml's poll_timeout says
        assert {poll["timeout"] for poll in bot.polls} == {1}


async def test_an_update_polled_again_after_a_lost_offset_makes_no_second_turn(
    tmp_path, monkeypatch
):
    """A kill after the request was durable and before the offset was written: the next
    poll hands the same update out again, and its key finds the first request."""
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    async with running(bot) as url:
        async with room(tmp_path, {"channels.toml": telegram_toml(url)}) as rt:
            update = bot.message(7, "hello")
            await until(lambda: turns(rt, "telegram:7"), "the update's turn")
            # the offset is written after the request is durable: wait for it too, then lose it
            await until(lambda: (rt.room.path / "poll" / "tg.json").exists(), "the offset written")
        (tmp_path / "room" / "poll" / "tg.json").unlink()
        bot.update({"update_id": update, "message": {
            "message_id": 1, "date": 1, "chat": {"id": 7, "type": "private"},
            "from": {"id": 7, "is_bot": False, "first_name": "Ann"}, "text": "hello"}})  # fmt: skip
        async with room(tmp_path, {}) as rt:
            await until(lambda: (rt.room.path / "poll" / "tg.json").exists(),
                        "the poll offset written again")  # fmt: skip
            assert len(await turns(rt, "telegram:7")) == 1


def slack_event(text: str, ts: str = "1700000000.000100", event_id: str = "Ev1") -> bytes:
    return json.dumps({
        "type": "event_callback", "event_id": event_id, "team_id": "T1",
        "event": {"type": "message", "channel": "C1", "user": "U1", "text": text, "ts": ts},
    }).encode()  # fmt: skip


def hooks_toml(slack_url: str, receiver_url: str) -> str:
    return (
        'listen = "127.0.0.1:0"\n'
        f'[team]\nkind = "slack"\nsigning_secret_env = "SLACK_SIGNING"\ntoken_env = "SLACK_BOT"\n'
        f'api_url = "{slack_url}/api"\n'
        '[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\ntext = "comment.body"\n'
        f'thread = "issue.number"\nsender = "sender.login"\ndeliver_url = "{receiver_url}/hook"\n'
    )


@asynccontextmanager
async def hooked(
    tmp_path: Path, monkeypatch: Any
) -> AsyncIterator[tuple[Runtime, str, SlackStandin, Receiver]]:
    for name, value in (
        ("SLACK_SIGNING", SIGNING),
        ("SLACK_BOT", BOT),
        ("HOOK_SECRET", HOOK_SECRET),
    ):
        monkeypatch.setenv(name, value)
    slack, receiver = SlackStandin(BOT), Receiver(HOOK_SECRET)
    async with running(slack) as s_url, running(receiver) as r_url:
        async with room(tmp_path, {"hooks.toml": hooks_toml(s_url, r_url)}) as rt:
            address = await until(lambda: rt.channels.hook_address, "the hook listener bound")
            yield rt, f"http://{address}", slack, receiver


async def test_a_slack_event_becomes_one_turn_answered_in_its_thread(tmp_path, monkeypatch):
    async with hooked(tmp_path, monkeypatch) as (rt, base, slack, _), httpx.AsyncClient() as http:
        body = slack_event("run `echo from slack`")
        answer = await http.post(f"{base}/hooks/team", content=body,
                                 headers=slack_headers(SIGNING, body, int(time.time())))  # fmt: skip
        assert answer.status_code == 200
        retry = await http.post(f"{base}/hooks/team", content=body, headers={
            **slack_headers(SIGNING, body, int(time.time())), "X-Slack-Retry-Num": "1"})  # fmt: skip
        assert retry.status_code == 200
        thread = "slack:C1:1700000000.000100"
        await approve_all(rt, thread)
        await until(lambda: slack.posts, "the answer posted to Slack")
        assert slack.posts[0]["channel"] == "C1"
        assert slack.posts[0]["thread_ts"] == "1700000000.000100"
        assert "from slack" in slack.posts[0]["text"]
        assert len(await turns(rt, thread)) == 1


async def test_unverified_deliveries_make_no_turn_and_say_why(tmp_path, monkeypatch):
    async with hooked(tmp_path, monkeypatch) as (rt, base, _, _), httpx.AsyncClient() as http:
        body = slack_event("run `touch pwned`")
        forged = slack_headers("not-the-secret-0123456789", body, int(time.time()))
        stale = slack_headers(SIGNING, body, int(time.time()) - 3600)
        for headers in (forged, stale, {}):
            answer = await http.post(f"{base}/hooks/team", content=body, headers=headers)
            assert answer.status_code == 401, answer.text
            assert SIGNING not in answer.text
        big = b"{" + b" " * (2 << 20) + b"}"
        answer = await http.post(f"{base}/hooks/gh", content=big,
                                 headers=webhook_headers(HOOK_SECRET, big, "d-big"))  # fmt: skip
        assert answer.status_code == 413
        assert (await http.post(f"{base}/hooks/nope", content=b"{}")).status_code == 404
        assert await on(rt.store).fetchall("SELECT id FROM turns") == []
        assert rt.channels.states["team"].rejected == 3


async def test_a_signed_webhook_becomes_one_turn_and_its_answer_is_posted_signed(
    tmp_path, monkeypatch
):
    async with (
        hooked(tmp_path, monkeypatch) as (rt, base, _, receiver),
        httpx.AsyncClient() as http,
    ):
        body = json.dumps({"comment": {"body": "run `echo from the hook`"},
                           "issue": {"number": 12}, "sender": {"login": "octo"}}).encode()  # fmt: skip
        for _ in range(2):  # a redelivery: the same delivery id
            answer = await http.post(f"{base}/hooks/gh", content=body,
                                     headers=webhook_headers(HOOK_SECRET, body, "d-1"))  # fmt: skip
            assert answer.status_code == 202
        turn_id = await approve_all(rt, "webhook:gh:12")
        await until(lambda: receiver.received, "the answer posted to the receiver")
        got = receiver.received[0]
        assert got.signed
        assert {k.lower(): v for k, v in got.headers.items()}["idempotency-key"]
        assert "from the hook" in json.loads(got.body)["text"]
        assert [t[0] for t in await turns(rt, "webhook:gh:12")] == [turn_id]
        [(sender,)] = await on(rt.store).fetchall(
            "SELECT sender FROM turns WHERE id = ?", (turn_id,))  # fmt: skip
        assert sender == "octo"


async def test_a_channel_whose_secret_is_unset_does_not_start_and_says_why(tmp_path, monkeypatch):
    """The runtime starts (the console, `agentdeck decide` must not need a bot's token);
    the channel does not, its state and a notice name the variable, and an answer a turn
    owes it waits in the outbox."""
    monkeypatch.delenv("TG_TOKEN", raising=False)
    async with room(tmp_path, {"channels.toml": telegram_toml("http://127.0.0.1:9")}) as rt:
        state = rt.channels.states["tg"]
        await until(lambda: state.state, "the channel stopped", ok=lambda s: s == "stopped")
        assert "$TG_TOKEN is not set" in (state.last_error or "")
        assert "tg" not in rt.channels.channels and rt.ctx.delivering == {"tg"}


async def test_a_malformed_channels_file_stops_the_start_before_any_write(tmp_path):
    path = tmp_path / "room"
    path.mkdir()
    (path / "channels.toml").write_text('[tg]\nkind = "telegram"\ntoken = "literal"\n')
    with pytest.raises(ChannelConfigError, match="a secret is never written in the file"):
        async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0)):
            pass


async def test_a_failing_service_marks_the_channel_and_a_malformed_update_is_passed(
    tmp_path, monkeypatch
):
    """A 502 from getUpdates: the channel says `failing` with the error, polls again after
    a pause and comes back `up`; an update it cannot read is skipped, not fetched forever,
    and the message after it still becomes a turn."""
    from starlette.responses import JSONResponse

    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    bot.fail_next("getUpdates", JSONResponse(
        {"ok": False, "error_code": 502, "description": "Bad Gateway"}, status_code=502))  # fmt: skip
    async with running(bot) as url, room(tmp_path, {"channels.toml": telegram_toml(url)}) as rt:
        state = rt.channels.states["tg"]
        await until(lambda: state.errors, "the 502 counted", ok=lambda n: n == 1)
        assert state.state == "failing" and "502" in (state.last_error or "")
        assert TOKEN not in (state.last_error or "")
        bot.raw({"update_id": 500, "message": "not an object"})
        bot.message(9, "after the bad one")
        await until(lambda: turns(rt, "telegram:9"), "the turn of the message after the bad one")
        await until(lambda: state.state, "the channel up again", ok=lambda s: s == "up")
        offset = json.loads((rt.room.path / "poll" / "tg.json").read_text())["offset"]
        assert offset > 500


async def test_a_webhook_without_a_deliver_url_owes_no_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    toml = ('listen = "127.0.0.1:0"\n[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\n'
            'text = "t"\nthread = "n"\n')  # fmt: skip
    async with room(tmp_path, {"hooks.toml": toml}) as rt, httpx.AsyncClient() as http:
        address = await until(lambda: rt.channels.hook_address, "the hook listener bound")
        body = json.dumps({"t": "hello", "n": 5}).encode()
        answer = await http.post(f"http://{address}/hooks/gh", content=body,
                                 headers=webhook_headers(HOOK_SECRET, body, "d-5"))  # fmt: skip
        assert answer.status_code == 202
        await until(lambda: on(rt.store).fetchall(
            "SELECT id FROM turns WHERE thread_id = 'webhook:gh:5' AND status = 'done'"),
            "the delivery's turn done")  # fmt: skip
        assert rt.ctx.delivering == frozenset()
        assert await on(rt.store).fetchall("SELECT id FROM outbox") == []


async def test_no_secret_reaches_the_room_even_when_the_service_fails(tmp_path, monkeypatch):
    """A failed sendMessage (Telegram puts the token in the URL) and a later success: no
    file of the room (execution.db and its WAL, the bus, poll/) holds a secret's bytes."""
    from starlette.responses import JSONResponse

    monkeypatch.setenv("TG_TOKEN", TOKEN)
    bot = TelegramStandin(TOKEN)
    bot.fail_next("sendMessage", JSONResponse(
        {"ok": False, "error_code": 502, "description": "Bad Gateway"}, status_code=502))  # fmt: skip
    async with running(bot) as url:
        cfg = telegram_toml(url)
        (tmp_path / "room").mkdir()
        (tmp_path / "room" / "agentdeck.toml").write_text("[delivery]\nbackoff = 0.05\n")
        async with room(tmp_path, {"channels.toml": cfg}) as rt:
            bot.message(3, "hello")
            await until(lambda: bot.sent, "the answer sent after the 502")
            # a try is counted before it leaves: ('retrying', 2) until the send is recorded
            await until(lambda: on(rt.store).fetchall("SELECT 1 FROM outbox WHERE state = 'sent'"),
                        "the send recorded")  # fmt: skip
            assert await rows(rt, "SELECT tries FROM outbox") == [(2,)]  # the 502, then sent
    leaked = [p for p in (tmp_path / "room").rglob("*")
              if p.is_file() and TOKEN.encode() in p.read_bytes()]  # fmt: skip
    assert leaked == []
    assert TOKEN.encode() not in room_bytes(tmp_path / "room")  # a PostgreSQL room's rows too
