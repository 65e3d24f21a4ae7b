"""The channels view, the outbound deliveries and the bus's rooms (issue 17), through the
client interface (in the owner's process and over its API), as problem documents, and
from the command line through an owner and on a free room.

A webhook channel whose receiver (a loopback stand-in) refuses an answer with a 400 makes
a dead delivery; the operator retries it (then it is sent) or drops it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.local import LocalClient
from engine.api.remote import RemoteClient
from engine.api.sockets import connect_path
from engine.cli import main
from engine.loops.server import serve_api
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.helpers import on
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import webhook_headers
from tests.wait import until

pytestmark = pytest.mark.anyio
SECRET = "webhook-secret-0123456789"


def hooks_toml(receiver_url: str) -> str:
    return (
        'listen = "127.0.0.1:0"\n'
        '[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\ntext = "comment.body"\n'
        f'thread = "issue.number"\nsender = "sender.login"\ndeliver_url = "{receiver_url}/hook"\n'
    )


@asynccontextmanager
async def owner(tmp_path: Path, monkeypatch: Any) -> AsyncIterator[tuple[Runtime, str, Receiver]]:
    """A room with a webhook channel, its loops running and its API served."""
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    receiver = Receiver(SECRET)
    path = tmp_path / "room"
    path.mkdir(exist_ok=True)
    async with running(receiver) as url:
        (path / "hooks.toml").write_text(hooks_toml(url))
        async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0),
                                tools=builtin_tools()) as rt, serve_api(rt):  # fmt: skip
            start_loops(rt)
            address = await until(lambda: rt.channels.hook_address, "the hook listens")
            yield rt, f"http://{address}", receiver


async def dead_answer(rt: Runtime, base: str, receiver: Receiver, issue: int) -> int:
    """A hook delivery whose turn's answer the receiver refuses (400): its outbox id."""
    receiver.answer_next(400)
    body = json.dumps({"comment": {"body": f"hello {issue}"}, "issue": {"number": issue},
                       "sender": {"login": "octo"}}).encode()  # fmt: skip
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{base}/hooks/gh", content=body,
                                 headers=webhook_headers(SECRET, body, f"d-{issue}"))  # fmt: skip
    assert answer.status_code == 202
    client = LocalClient(rt)
    thread = f"webhook:gh:{issue}"
    [dead] = await until(lambda: _dead(client, thread), "the answer is dead")
    [(body,)] = await on(rt.store).fetchall(
        "SELECT body FROM events WHERE kind = 'turn_started' AND thread_id = ?", (thread,))  # fmt: skip
    started = json.loads(body)  # the console shows who sent it, and through which channel
    assert (started["channel"], started["sender"], started["origin"]) == ("gh", "octo", "chat")
    return dead.id


async def _dead(client: LocalClient, thread: str) -> list[Any]:
    return [d for d in await client.deliveries("dead") if d.thread_id == thread]


async def check_client(client: Any, rt: Runtime, base: str, receiver: Receiver) -> None:
    """What any client sees of the loops, channels, deliveries and rooms; retry and drop."""
    one = await dead_answer(rt, base, receiver, 1)
    view = await client.channels()
    loops = {s.name: s for s in view.loops}
    assert loops["server"].state == "up" and loops["server"].detail["socket"].endswith("agent.sock")
    assert loops["pulse"].state == "up"
    assert loops["hook"].state == "up" and loops["hook"].detail["address"] == view.hook_address
    [gh] = view.channels
    assert (gh.name, gh.kind, gh.loop, gh.received) == ("gh", "webhook", "hook", 1)
    assert gh.state == "failing" and "400" in (gh.last_error or "")
    assert view.delivering and view.deliveries["dead"] == 1
    [row] = await client.deliveries("dead", 10)
    assert (row.id, row.channel, row.thread_id, row.tries) == (one, "gh", "webhook:gh:1", 1)
    assert "offline model" in row.text and "400" in (row.last_error or "")
    assert "reply" not in row.model_dump()
    # retry: pending again, then sent; a sent one is neither retried nor dropped
    again = await client.retry_delivery(one)
    assert again.id == one and again.state in ("pending", "sent")
    await until(lambda: receiver.received, "the receiver got the answer")
    sent = await until(lambda: _state(client, one, "sent"), "the answer is sent")
    assert sent.sent_at is not None
    with pytest.raises(Conflict, match=f"delivery {one} is sent"):
        await client.retry_delivery(one)
    with pytest.raises(Conflict, match="only a dead or retrying one can be dropped"):
        await client.drop_delivery(one)
    with pytest.raises(NotFound, match="no delivery 999"):
        await client.drop_delivery(999)
    # drop: kept, marked dropped; it is not sent
    two = await dead_answer(rt, base, receiver, 2)
    dropped = await client.drop_delivery(two)
    assert dropped.state == "dropped"
    assert [d.id for d in await client.deliveries("dropped")] == [two]
    assert (await client.channels()).deliveries == {
        "pending": 0, "retrying": 0, "sent": 1, "dead": 0, "dropped": 1}  # fmt: skip
    # the bus: this room, its owner alive
    [room] = await until(client.rooms, "the room is on the bus")
    assert (room.name, room.this, room.pid, room.alive) == ("room", True, os.getpid(), True)
    assert Path(room.room) == rt.room.path


async def _state(client: Any, outbox_id: int, state: str) -> Any:
    found = [d for d in await client.deliveries(state) if d.id == outbox_id]
    return found[0] if found else None


async def test_channels_and_deliveries_in_the_owners_process(tmp_path: Path, monkeypatch):
    async with owner(tmp_path, monkeypatch) as (rt, base, receiver):
        await check_client(LocalClient(rt), rt, base, receiver)
        with pytest.raises(Invalid, match="no delivery state 'lost'"):
            await LocalClient(rt).deliveries("lost")


async def test_channels_and_deliveries_over_the_api(tmp_path: Path, monkeypatch):
    async with owner(tmp_path, monkeypatch) as (rt, base, receiver):
        async with RemoteClient(Room.at(rt.room.path)) as client:
            await check_client(client, rt, base, receiver)
        transport = httpx.AsyncHTTPTransport(uds=connect_path(rt.room.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://agentdeck") as http:
            for method, path, status, says in [
                ("GET", "/v1/deliveries?state=lost", 422, "state"),
                ("GET", "/v1/deliveries?limit=0", 422, "limit"),
                ("POST", "/v1/deliveries/999/retry", 404, "no delivery 999"),
                ("POST", "/v1/deliveries/x/drop", 422, "outbox_id"),
                ("POST", "/v1/deliveries/1/retry", 409, "is sent"),
            ]:
                answer = await http.request(method, path)
                assert answer.status_code == status, (path, answer.text)
                assert answer.headers["content-type"] == "application/problem+json"
                assert says in answer.json()["detail"]
            listed = await http.get("/v1/channels")
            assert [s["name"] for s in listed.json()["channels"]] == ["gh"]
            assert SECRET not in listed.text


def cli(room: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--room", str(room), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


async def test_the_commands_through_the_owner_and_on_a_free_room(
    tmp_path: Path, monkeypatch, capsys
):
    room = tmp_path / "room"
    async with owner(tmp_path, monkeypatch) as (rt, base, receiver):
        dead = await dead_answer(rt, base, receiver, 3)

        def through_owner() -> None:
            code, out, _ = cli(room, capsys, "channels")
            assert code == 0
            lines = out.splitlines()
            assert lines[0].split()[:5] == ["name", "loop", "kind", "group", "state"]
            assert [ln.split()[0] for ln in lines[1:5]] == ["server", "pulse", "hook", "gh"]
            assert "deliveries: pending 0  retrying 0  sent 0  dead 1  dropped 0" in out
            code, out, _ = cli(room, capsys, "channels", "--json")
            assert json.loads(out)["deliveries"]["dead"] == 1
            code, out, _ = cli(room, capsys, "deliveries", "--state", "dead")
            head, row = out.splitlines()
            assert head.split()[:3] == ["id", "state", "channel"]
            assert row.split()[:4] == [str(dead), "dead", "gh", "webhook:gh:3"]
            code, out, err = cli(room, capsys, "deliveries", "--state", "retrying")
            assert (code, out) == (0, "") and "no retrying deliveries" in err
            code, _, err = cli(room, capsys, "deliveries", "retry", "77")
            assert code == 2 and "no delivery 77" in err
            code, _, err = cli(room, capsys, "deliveries", "drop")
            assert code == 2 and "needs the delivery's ID" in err
            code, out, _ = cli(room, capsys, "rooms", "--json")
            [listed] = json.loads(out)
            assert listed["this"] and listed["alive"]
            code, out, _ = cli(room, capsys, "rooms")
            assert out.splitlines()[1].startswith("room *")

        await anyio.to_thread.run_sync(through_owner)

    def on_a_free_room() -> None:  # its loops do not run: nothing is up, nothing is sent
        code, out, _ = cli(room, capsys, "channels", "--json")
        view = json.loads(out)
        assert code == 0 and not view["delivering"]
        assert {s["state"] for s in view["loops"] + view["channels"]} == {"stopped"}
        code, _, err = cli(room, capsys, "deliveries", "retry", str(dead))
        assert code == 1 and "the delivery worker is not running" in err
        code, out, _ = cli(room, capsys, "rooms", "--json")
        [listed] = json.loads(out)
        assert listed["pid"] is None and not listed["alive"]

    await anyio.to_thread.run_sync(on_a_free_room)
