"""The generic webhook channel: signed deliveries checked and mapped, answers POSTed signed
with an Idempotency-Key to a receiver on loopback, errors that say whether to retry."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.channels import DeliveryError, HookRejected, WebhookChannel
from engine.channels.config import Secret, WebhookConfig
from engine.channels.webhook import pick
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import hub_signature, webhook_headers
from tests.wait import PATIENCE

SECRET = "It's a Secret to Everybody"
NOW = 1_700_000_000.0


def channel(
    deliver_url: str | None = None, timeout: float = PATIENCE, **extra: Any
) -> WebhookChannel:
    config = WebhookConfig.model_validate({
        "name": "gh", "kind": "webhook", "secret_env": "HS", "text": "comment.body",
        "thread": "issue.number", "sender": "sender.login", "deliver_url": deliver_url,
        "timeout": timeout, "max_body": 2048, **extra,
    })  # fmt: skip
    return WebhookChannel(config, Secret("HS", SECRET))


def payload(**over: Any) -> dict[str, Any]:
    return {"action": "created", "issue": {"number": 17}, "comment": {"body": "ship it"},
            "sender": {"login": "octocat"}, **over}  # fmt: skip


def signed(body_or_payload: Any, delivery: str = "72d3162e-cc78") -> tuple[dict[str, str], bytes]:
    body = (
        body_or_payload
        if isinstance(body_or_payload, bytes)
        else json.dumps(body_or_payload).encode()
    )
    return webhook_headers(SECRET, body, delivery), body


def rejected(
    headers: dict[str, str], body: bytes, hook: WebhookChannel | None = None
) -> HookRejected:
    with pytest.raises(HookRejected) as caught:
        (hook or channel()).accept(headers, body, NOW)
    assert SECRET not in str(caught.value)
    return caught.value


def test_githubs_documented_signature() -> None:
    """The example of GitHub's docs ('Validating webhook deliveries')."""
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert hub_signature(SECRET, b"Hello, World!") == expected


def test_a_signed_delivery_becomes_an_inbound() -> None:
    reply, [inbound] = channel().accept(*signed(payload()), NOW)
    assert 200 <= reply.status < 300
    assert (inbound.channel, inbound.thread_id, inbound.sender) == (
        "gh",
        "webhook:gh:17",
        "octocat",
    )
    assert inbound.text == "ship it" and inbound.reply == {"thread": "17"}
    assert inbound.dedup_key == "webhook:gh:72d3162e-cc78"


def test_header_names_are_configurable() -> None:
    hook = channel(signature_header="X-Signature", delivery_header="X-Request-Id", sender=None)
    body = json.dumps(payload()).encode()
    headers = {"x-signature": hub_signature(SECRET, body), "x-request-id": "r1"}
    _, [inbound] = hook.accept(headers, body, NOW)
    assert inbound.dedup_key == "webhook:gh:r1" and inbound.sender == "gh"


def test_unsigned_or_wrongly_signed_is_401() -> None:
    headers, body = signed(payload())
    assert "missing" in rejected({"X-GitHub-Delivery": "d"}, body).reason
    assert rejected(webhook_headers("not the secret", body, "d"), body).status == 401
    assert rejected(headers, body.replace(b"ship", b"sink")).status == 401
    headers["X-Hub-Signature-256"] = "sha1=" + "0" * 40
    assert rejected(headers, body).status == 401


def test_a_delivery_without_its_id_is_400() -> None:
    headers, body = signed(payload())
    del headers["X-GitHub-Delivery"]
    assert rejected(headers, body).status == 400
    assert rejected(*signed(payload(), delivery="x" * 300)).status == 400


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "not JSON"),
        (payload(comment={}), 422, "no text at comment.body"),
        (payload(comment={"body": 5}), 422, "no text at comment.body"),
        (payload(issue=None), 422, "no thread"),
        (payload(issue={"number": True}), 422, "no thread"),
        ([1, 2], 422, "no text"),
    ],
)  # fmt: skip
def test_a_signed_but_unusable_body(body: Any, status: int, reason: str) -> None:
    caught = rejected(*signed(body))
    assert caught.status == status and reason in caught.reason


def test_githubs_ping_is_answered_without_a_message() -> None:
    headers, body = signed({"zen": "Keep it logically awesome.", "hook_id": 1})
    reply, found = channel().accept({**headers, "X-GitHub-Event": "ping"}, body, NOW)
    assert reply.status == 200 and found == []
    assert rejected(headers, body).status == 422  # the same body, not a ping


def test_an_oversized_body_is_413() -> None:
    assert rejected(*signed(b"x" * 2049)).status == 413


def test_pick_follows_dotted_paths() -> None:
    body = {"a": {"b": [{"c": "deep"}]}}
    assert pick(body, "a.b.0.c") == "deep"
    assert pick(body, "a.b.1.c") is None and pick(body, "a.x") is None and pick([], "a") is None


# Delivery


class Setup:
    def __init__(self, receiver: Receiver, url: str) -> None:
        self.receiver, self.url, self.made = receiver, url, list[WebhookChannel]()

    def channel(self, timeout: float = PATIENCE) -> WebhookChannel:
        self.made.append(channel(self.url + "/hook", timeout))
        return self.made[-1]


@pytest.fixture
async def out(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Setup]:
    caplog.set_level(logging.DEBUG)
    receiver = Receiver(SECRET)
    async with running(receiver) as url:
        setup = Setup(receiver, url)
        try:
            yield setup
        finally:
            for made in setup.made:
                await made.aclose()
    assert SECRET not in caplog.text


@pytest.mark.anyio
async def test_an_answer_is_posted_signed_with_its_key(out: Setup) -> None:
    text = "done ✓ " * 3000
    await out.channel().deliver({"thread": "17"}, text, "turn-9:answer")
    [got] = out.receiver.received
    assert got.signed and got.headers["idempotency-key"] == "turn-9:answer"
    body = json.loads(got.body)
    assert body == {"thread": "17", "text": text, "channel": "gh", "key": "turn-9:answer"}


@pytest.mark.parametrize(
    ("status", "retry_after", "permanent", "wait"),
    [(429, "12", False, 12.0), (503, None, False, None), (500, "Wed, 21 Oct 2015 07:28:00 GMT",
     False, 0.0), (400, None, True, None), (404, "5", True, None), (410, None, True, None)],
)  # fmt: skip
@pytest.mark.anyio
async def test_the_receivers_status_says_whether_to_retry(
    out: Setup, status: int, retry_after: str | None, permanent: bool, wait: float | None
) -> None:
    out.receiver.answer_next(status, retry_after)
    with pytest.raises(DeliveryError) as caught:
        await out.channel().deliver({"thread": "17"}, "hi", "k")
    assert (caught.value.permanent, caught.value.retry_after) == (permanent, wait)
    assert f"HTTP {status}" in str(caught.value)


@pytest.mark.anyio
async def test_a_hanging_receiver_is_transient(out: Setup) -> None:
    out.receiver.hang_next()
    with pytest.raises(DeliveryError) as caught:
        await out.channel(timeout=0.3).deliver({"thread": "17"}, "hi", "k")
    assert not caught.value.permanent and "Timeout" in str(caught.value)


@pytest.mark.anyio
async def test_no_deliver_url_or_a_bad_key_is_permanent() -> None:
    hook = channel(None)
    with pytest.raises(DeliveryError, match="no deliver_url"):
        await hook.deliver({"thread": "1"}, "hi", "k")
    await hook.aclose()
    hook = channel("http://127.0.0.1:9/hook")
    with pytest.raises(DeliveryError, match="not printable ASCII") as caught:
        await hook.deliver({"thread": "1"}, "hi", "k\n")
    assert caught.value.permanent
    with pytest.raises(DeliveryError) as refused:  # nothing listens on port 9
        await hook.deliver({"thread": "1"}, "hi", "k")
    assert not refused.value.permanent
    await hook.aclose()


# --- a signed timestamp (issue 25: a replay under a new delivery id was a new turn) --------


def stamped(stamp: str, delivery: str, body: bytes) -> dict[str, str]:
    content = f"{stamp}.{delivery}.".encode() + body
    return {"X-Hub-Signature-256": hub_signature(SECRET, content),
            "X-GitHub-Delivery": delivery, "X-Hook-Timestamp": stamp}  # fmt: skip


def test_without_a_timestamp_header_a_replay_under_a_new_id_is_a_new_message() -> None:
    """What README says of GitHub's form: the signature covers the body, not the id."""
    headers, body = signed(payload())
    first = channel().accept(headers, body, NOW)[1]
    replayed = channel().accept({**headers, "X-GitHub-Delivery": "another-id"}, body, NOW)[1]
    assert first[0].dedup_key != replayed[0].dedup_key


def test_with_a_timestamp_header_the_id_and_the_time_are_signed() -> None:
    hook = channel(timestamp_header="X-Hook-Timestamp", max_age=300)
    body = json.dumps(payload()).encode()
    stamp = str(int(NOW))
    [inbound] = hook.accept(stamped(stamp, "d-1", body), body, NOW)[1]
    assert inbound.dedup_key == "webhook:gh:d-1"
    replay = {**stamped(stamp, "d-1", body), "X-GitHub-Delivery": "d-2"}  # a new id
    assert rejected(replay, body, hook).status == 401
    old = stamped(str(int(NOW) - 301), "d-3", body)  # signed, but too old
    assert "too far from now" in str(rejected(old, body, hook))
    unstamped, _ = signed(body, "d-4")  # GitHub's form: no timestamp
    assert "X-Hook-Timestamp missing" in str(rejected(unstamped, body, hook))
    odd = {**stamped("12ab", "d-5", body)}
    assert "not Unix seconds" in str(rejected(odd, body, hook))


@pytest.mark.anyio
async def test_with_a_timestamp_header_an_answer_is_signed_the_same_way() -> None:
    import httpx

    seen: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    config = channel("http://receiver.test/hook", timestamp_header="X-Hook-Timestamp").config
    async with httpx.AsyncClient(transport=httpx.MockTransport(receiver)) as client:
        hook = WebhookChannel(config, Secret("HS", SECRET), client)
        await hook.deliver({"thread": "17"}, "done", "key-1")
    [request] = seen
    stamp = request.headers["X-Hook-Timestamp"]
    content = f"{stamp}.key-1.".encode() + request.content
    assert request.headers["X-Hub-Signature-256"] == hub_signature(SECRET, content)
