"""The Telegram channel against a Bot API stand-in on loopback: polling, parsing, sending,
splitting, and errors that say whether a retry helps, with the token in none of them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.responses import Response

from engine.channels import DeliveryError, PollError, TelegramChannel
from engine.channels.base import split_text, utf16_len
from engine.channels.config import Secret, TelegramConfig
from tests.standins import running
from tests.standins.telegram import TelegramStandin
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio
TOKEN = "123456:AAH-secret-token_value"


def channel(url: str, timeout: float = PATIENCE, token: str = TOKEN) -> TelegramChannel:
    config = TelegramConfig.model_validate(
        {"name": "bot", "kind": "telegram", "token_env": "TG", "api_url": url, "timeout": timeout}
    )
    return TelegramChannel(config, Secret("TG", token))


class Setup:
    """A stand-in, served, and the channels a test made (closed at its end)."""

    def __init__(self, standin: TelegramStandin, url: str) -> None:
        self.standin, self.url, self.made = standin, url, list[TelegramChannel]()

    def channel(self, timeout: float = PATIENCE, token: str = TOKEN) -> TelegramChannel:
        self.made.append(channel(self.url, timeout, token))
        return self.made[-1]


@pytest.fixture
async def tg(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Setup]:
    caplog.set_level(logging.DEBUG)
    standin = TelegramStandin(TOKEN)
    async with running(standin) as url:
        setup = Setup(standin, url)
        try:
            yield setup
        finally:
            for made in setup.made:
                await made.aclose()
    assert TOKEN not in caplog.text, "the token reached a log"
    assert all(TOKEN not in str(r.msg) and TOKEN not in str(r.args) for r in caplog.records)


async def test_a_text_message_becomes_an_inbound(tg: Setup) -> None:
    standin, bot = tg.standin, tg.channel()
    first = standin.message(42, "hello there", user="ann")
    updates, offset = await bot.poll(None, 0)
    assert offset == first + 1
    [(update_id, inbound)] = updates
    assert update_id == first and inbound is not None
    assert (inbound.channel, inbound.thread_id, inbound.sender) == ("bot", "telegram:42", "@ann")
    assert inbound.text == "hello there"
    assert inbound.dedup_key == f"telegram:bot:{first}"
    assert inbound.reply == {"chat_id": 42}
    assert standin.polls[-1]["allowed_updates"] == ["message"]
    assert "offset" not in standin.polls[-1]
    assert await bot.poll(offset, 0) == ([], offset)  # the offset confirmed the update
    assert standin.polls[-1]["offset"] == offset


async def test_a_long_poll_answers_when_a_message_arrives(tg: Setup) -> None:
    standin, bot = tg.standin, tg.channel()
    got: list[object] = []

    async def poll() -> None:
        got.append(await bot.poll(None, 30))

    async with anyio.create_task_group() as tg_:
        tg_.start_soon(poll)
        await until(lambda: standin.polls, "the long poll reached the stand-in")
        assert standin.polls[0]["timeout"] == 30 and not got  # held by the stand-in
        update_id = standin.message(7, "late")
    [(updates, offset)] = got  # type: ignore[misc]
    assert [u for u, _ in updates] == [update_id] and offset == update_id + 1


async def test_other_and_malformed_updates_are_skipped_past(
    tg: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    standin, bot = tg.standin, tg.channel()
    sticker = standin.update({"message": {"message_id": 1, "chat": {"id": 5}, "sticker": {}}})
    standin.raw({"update_id": 300, "message": "not an object"})
    standin.raw({"update_id": 301, "message": {"chat": {"id": "x"}, "text": "hi"}})
    standin.raw(["no", "update_id"])
    robot = standin.update(
        {"message": {"chat": {"id": 5}, "from": {"id": 9, "is_bot": True}, "text": "beep"}}
    )
    text = standin.message(5, "real")
    updates, offset = await bot.poll(None, 0)
    assert [(u, i is not None) for u, i in updates] == [
        (sticker, False), (300, False), (301, False), (robot, False), (text, True)
    ]  # fmt: skip
    assert offset == 302
    assert "update 300 skipped: message is not an object" in caplog.text
    assert "update 301 skipped: message's chat has no id" in caplog.text
    assert "has no update_id; skipped" in caplog.text
    assert await bot.poll(offset, 0) == ([], offset)


@pytest.mark.parametrize(
    ("response", "permanent"),
    [
        (Response(b"{not json", 200, media_type="application/json"), False),
        (Response(b'{"ok": true, "result": {"a": 1}}', 200, media_type="application/json"), False),
        (Response(b"<html>bad gateway</html>", 502), False),
        (Response(b'{"ok":false,"error_code":409,"description":"Conflict: terminated by '
                  b'other getUpdates request"}', 409, media_type="application/json"), True),
    ],
)  # fmt: skip
async def test_a_bad_poll_answer_is_an_error_not_a_crash(
    tg: Setup, response: Response, permanent: bool
) -> None:
    standin, bot = tg.standin, tg.channel()
    standin.fail_next("getUpdates", response)
    with pytest.raises(PollError) as caught:
        await bot.poll(10, 0)
    assert caught.value.permanent is permanent
    assert TOKEN not in str(caught.value)


async def test_send_splits_a_long_answer(tg: Setup) -> None:
    standin, bot = tg.standin, tg.channel()
    text = "\n".join(f"line {i} " + "x" * 90 for i in range(120))  # about 12,000 characters
    await bot.deliver({"chat_id": 42}, text, "answer-1")
    parts = [s["text"] for s in standin.sent]
    assert len(parts) == 3 and "".join(parts) == text
    assert all(utf16_len(p) <= 4096 and p.endswith("\n") for p in parts[:-1])
    assert {s["chat_id"] for s in standin.sent} == {42}
    await bot.deliver({"chat_id": 42}, "  \n", "answer-2")  # nothing to send
    assert len(standin.sent) == 3


async def test_429_gives_retry_after_and_a_retry_resumes(tg: Setup) -> None:
    standin, bot = tg.standin, tg.channel()
    text = "a" * 4096 + "b" * 10
    await bot.deliver({"chat_id": 1}, "warm up", "k0")
    standin.too_many("sendMessage", 7, after=1)  # the first part goes out, the second not
    with pytest.raises(DeliveryError) as caught:
        await bot.deliver({"chat_id": 1}, text, "k1")
    assert (caught.value.permanent, caught.value.retry_after) == (False, 7.0)
    assert "429 Too Many Requests" in str(caught.value)
    await bot.deliver({"chat_id": 1}, text, "k1")
    assert [s["text"] for s in standin.sent] == ["warm up", "a" * 4096, "b" * 10]


def hang(standin: TelegramStandin) -> None:
    standin.hang_next("sendMessage")


@pytest.mark.parametrize(
    ("reply", "setup", "permanent"),
    [
        ({"chat_id": 13}, lambda s: s.blocked.add(13), True),  # 403 blocked
        ({"chat_id": "@nope"}, None, True),  # 400 chat not found
        ({"chat_id": 1}, lambda s: s.fail_next("sendMessage", Response(b"oops", 500)), False),
        ({"chat_id": 1}, lambda s: s.fail_next("sendMessage", Response(
            b'{"ok":false,"error_code":502,"description":"Bad Gateway"}', 502)), False),
        ({"chat_id": 1}, hang, False),  # times out
        ({}, None, True),  # nowhere to send
    ],
)  # fmt: skip
async def test_send_errors_say_whether_to_retry(
    tg: Setup,
    reply: dict,
    setup: object,
    permanent: bool,  # type: ignore[type-arg]
) -> None:
    standin, bot = tg.standin, tg.channel(timeout=0.5 if setup is hang else PATIENCE)
    if callable(setup):
        setup(standin)
    with pytest.raises(DeliveryError) as caught:
        await bot.deliver(reply, "hi", "k")
    assert caught.value.permanent is permanent and caught.value.retry_after is None
    assert TOKEN not in str(caught.value) and str(caught.value).startswith("bot: ")


async def test_a_wrong_token_is_permanent(tg: Setup) -> None:
    bot = tg.channel(token="999:wrong-token-value")
    with pytest.raises(DeliveryError) as caught:
        await bot.deliver({"chat_id": 1}, "hi", "k")
    assert caught.value.permanent and "401 Unauthorized" in str(caught.value)
    assert "wrong-token-value" not in str(caught.value)


async def test_no_server_is_transient_and_the_token_stays_hidden(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    standin = TelegramStandin(TOKEN)
    async with running(standin) as url:
        bot = channel(url)
        await bot.deliver({"chat_id": 1}, "hi", "k")
    assert "/bot[redacted]/sendMessage" in caplog.text  # httpx's request line, masked
    try:
        with pytest.raises(DeliveryError) as caught:
            await bot.deliver({"chat_id": 1}, "hi", "k")  # the server is gone
        with pytest.raises(PollError) as polled:
            await bot.poll(None, 0)
    finally:
        await bot.aclose()
    assert not caught.value.permanent and not polled.value.permanent
    assert "ConnectError" in str(caught.value)
    for text in (str(caught.value), str(polled.value), repr(bot), caplog.text):
        assert TOKEN not in text


@given(st.text(max_size=300), st.integers(2, 40))
def test_split_joins_back_within_the_limit(text: str, limit: int) -> None:
    for length in (len, utf16_len):
        parts = split_text(text, limit, length)
        assert "".join(parts) == text
        assert all(0 < length(p) <= limit for p in parts)


def test_split_prefers_a_newline_then_a_space() -> None:
    assert split_text("a" * 10 + "\n" + "b" * 10, 15) == ["a" * 10 + "\n", "b" * 10]
    assert split_text("aaa bbb ccc", 9) == ["aaa bbb ", "ccc"]
    assert split_text("x" * 10, 4) == ["xxxx", "xxxx", "xx"]
    assert split_text("😀😀😀", 4, utf16_len) == ["😀😀", "😀"]  # never half a pair
