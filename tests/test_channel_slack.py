"""The Slack channel: Events API requests checked and read, answers posted to a Web API
stand-in on loopback, errors that say whether a retry helps, secrets in none of them."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.channels import DeliveryError, HookRejected, SlackChannel
from engine.channels.config import Secret, SlackConfig
from tests.standins import running
from tests.standins.sign import slack_headers
from tests.standins.slack import SlackStandin
from tests.wait import PATIENCE

SIGNING = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy"
NOW = 1_700_000_000


def channel(url: str = "http://127.0.0.1:9/api", timeout: float = PATIENCE) -> SlackChannel:
    config = SlackConfig.model_validate({
        "name": "team", "kind": "slack", "signing_secret_env": "SS", "token_env": "ST",
        "api_url": url, "timeout": timeout, "max_body": 4096,
    })  # fmt: skip
    return SlackChannel(config, Secret("SS", SIGNING), Secret("ST", TOKEN))


def event(**fields: Any) -> dict[str, Any]:
    inner = {"type": "message", "channel": "C024BE91L", "user": "U2147483697",
             "text": "Live long and prosper", "ts": "1355517523.000005", **fields}  # fmt: skip
    return {"token": "legacy", "team_id": "T1", "type": "event_callback",
            "event_id": "Ev08MFMKH6", "event_time": NOW, "event": inner}  # fmt: skip


def signed(payload: Any, at: int = NOW) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    return slack_headers(SIGNING, body, at), body


def rejected(headers: dict[str, str], body: bytes, now: float = NOW) -> HookRejected:
    with pytest.raises(HookRejected) as caught:
        channel().accept(headers, body, now)
    assert SIGNING not in str(caught.value) and SIGNING not in caught.value.reason
    return caught.value


def test_a_signed_message_becomes_an_inbound() -> None:
    reply, [inbound] = channel().accept(*signed(event()), NOW + 299)
    assert reply.status == 200
    assert inbound.channel == "team" and inbound.sender == "U2147483697"
    assert inbound.thread_id == "slack:C024BE91L:1355517523.000005"
    assert inbound.dedup_key == "slack:team:C024BE91L:1355517523.000005"
    assert inbound.reply == {"channel": "C024BE91L", "thread_ts": "1355517523.000005"}
    assert inbound.text == "Live long and prosper"


def test_a_reply_in_a_thread_stays_in_it_and_mentions_count() -> None:
    payload = event(type="app_mention", ts="1355517599.000001", thread_ts="1355517523.000005")
    _, [inbound] = channel().accept(*signed(payload), NOW)
    assert inbound.thread_id == "slack:C024BE91L:1355517523.000005"
    assert inbound.reply["thread_ts"] == "1355517523.000005"


def test_headers_are_case_insensitive() -> None:
    headers, body = signed(event())
    _, found = channel().accept({k.lower(): v for k, v in headers.items()}, body, NOW)
    assert len(found) == 1


def test_url_verification_answers_the_challenge() -> None:
    payload = {"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
               "type": "url_verification"}  # fmt: skip
    reply, found = channel().accept(*signed(payload), NOW)
    assert (reply.status, reply.body, found) == (200, {"challenge": payload["challenge"]}, [])


@pytest.mark.parametrize(
    "fields",
    [{"bot_id": "B123", "subtype": "bot_message"}, {"bot_id": "B1"},
     {"subtype": "message_changed"}, {"type": "reaction_added"}, {"text": ""}],
)  # fmt: skip
def test_bots_and_other_events_make_no_turn(fields: dict[str, Any]) -> None:
    reply, found = channel().accept(*signed(event(**fields)), NOW)
    assert reply.status == 200 and found == []


def test_a_wrong_signature_is_401() -> None:
    headers, body = signed(event())
    forged = slack_headers("another-secret", body, NOW)
    assert rejected(forged, body).status == 401
    tampered = body.replace(b"prosper", b"perish!")
    assert "does not match" in rejected(headers, tampered).reason
    headers["X-Slack-Signature"] = "v0=zz"
    assert rejected(headers, body).status == 401


@pytest.mark.parametrize("drop", ["X-Slack-Signature", "X-Slack-Request-Timestamp"])
def test_a_missing_header_is_401(drop: str) -> None:
    headers, body = signed(event())
    del headers[drop]
    assert "missing" in rejected(headers, body).reason


@pytest.mark.parametrize("skew", [301, -301, 10**9])
def test_a_stale_timestamp_is_401(skew: int) -> None:
    headers, body = signed(event())  # signed rightly, but at NOW
    caught = rejected(headers, body, now=NOW + skew)
    assert caught.status == 401 and "too far from now" in caught.reason
    headers["X-Slack-Request-Timestamp"] = "soon"
    assert rejected(headers, body).status == 401


def test_an_oversized_body_is_413_before_anything_else() -> None:
    assert rejected({}, b"x" * 4097).status == 413


@pytest.mark.parametrize(
    ("body", "status"),
    [(b"{not json", 400), (b"[1, 2]", 400), (b"[" * 100_000, 400),
     (json.dumps({"type": "event_callback", "event": {}}).encode(), 400),
     (json.dumps({"type": "url_verification"}).encode(), 400)],
)  # fmt: skip
def test_a_signed_but_malformed_body_is_400(body: bytes, status: int) -> None:
    if len(body) > 4096:
        big = channel()
        big.config.max_body = 1024 * 1024
        with pytest.raises(HookRejected) as caught:
            big.accept(slack_headers(SIGNING, body, NOW), body, NOW)
        assert caught.value.status == status
        return
    assert rejected(slack_headers(SIGNING, body, NOW), body).status == status


# Delivery


class Setup:
    def __init__(self, standin: SlackStandin, url: str) -> None:
        self.standin, self.url, self.made = standin, url, list[SlackChannel]()

    def channel(self, timeout: float = PATIENCE) -> SlackChannel:
        self.made.append(channel(self.url + "/api", timeout))
        return self.made[-1]


@pytest.fixture
async def web(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Setup]:
    caplog.set_level(logging.DEBUG)
    standin = SlackStandin(TOKEN, channels={"C024BE91L"})
    async with running(standin) as url:
        setup = Setup(standin, url)
        try:
            yield setup
        finally:
            for made in setup.made:
                await made.aclose()
    assert TOKEN not in caplog.text and SIGNING not in caplog.text


REPLY = {"channel": "C024BE91L", "thread_ts": "1355517523.000005"}


@pytest.mark.anyio
async def test_an_answer_goes_to_the_thread_split_at_40000(web: Setup) -> None:
    text = ("word " * 9000).strip()  # 44,999 characters
    await web.channel().deliver(REPLY, text, "k1")
    posts = web.standin.posts
    assert [p["thread_ts"] for p in posts] == ["1355517523.000005"] * 2
    assert "".join(p["text"] for p in posts) == text
    assert all(len(p["text"]) <= 40_000 for p in posts)


@pytest.mark.anyio
async def test_a_rate_limit_gives_retry_after(web: Setup) -> None:
    web.standin.rate_limit_next(30)
    with pytest.raises(DeliveryError) as caught:
        await web.channel().deliver(REPLY, "hi", "k")
    assert (caught.value.permanent, caught.value.retry_after) == (False, 30.0)
    web.standin.error_next("ratelimited")  # the same as an ok: false body
    with pytest.raises(DeliveryError) as caught:
        await web.channel().deliver(REPLY, "hi", "k")
    assert not caught.value.permanent and caught.value.retry_after is not None


def hang(standin: SlackStandin) -> None:
    standin.hang_next()


@pytest.mark.parametrize(
    ("setup", "reply", "permanent"),
    [
        (lambda s: None, {"channel": "C-unknown"}, True),  # channel_not_found
        (lambda s: s.error_next("not_in_channel"), REPLY, True),
        (lambda s: s.error_next("invalid_auth"), REPLY, True),
        (lambda s: s.error_next("internal_error"), REPLY, False),
        (lambda s: s.status_next(503), REPLY, False),
        (lambda s: s.status_next(404), REPLY, True),
        (hang, REPLY, False),  # times out
        (lambda s: None, {}, True),  # nowhere to post
    ],
)  # fmt: skip
@pytest.mark.anyio
async def test_post_errors_say_whether_to_retry(
    web: Setup, setup: Any, reply: dict[str, str], permanent: bool
) -> None:
    setup(web.standin)
    with pytest.raises(DeliveryError) as caught:
        await web.channel(timeout=0.5 if setup is hang else PATIENCE).deliver(reply, "hi", "k")
    assert caught.value.permanent is permanent
    assert TOKEN not in str(caught.value) and str(caught.value).startswith("team: ")
    assert web.standin.posts == []


@pytest.mark.anyio
async def test_a_wrong_token_is_permanent(web: Setup) -> None:
    web.standin.token = "xoxb-another"
    with pytest.raises(DeliveryError, match="invalid_auth") as caught:
        await web.channel().deliver(REPLY, "hi", "k")
    assert caught.value.permanent


def test_the_message_and_app_mention_events_of_one_message_share_a_key() -> None:
    """Slack sends both when the bot is mentioned in a channel it listens to, each with
    its own event_id: one message must make one turn."""
    plain = event()
    mention = {
        **plain,
        "event_id": "Ev0MENTION",
        "event": {**plain["event"], "type": "app_mention"},
    }
    _, [a] = channel().accept(*signed(plain), NOW)
    _, [b] = channel().accept(*signed(mention), NOW)
    assert a.dedup_key == b.dedup_key
