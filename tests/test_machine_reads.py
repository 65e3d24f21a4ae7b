"""Every room of the machine read at once (issue 38, engine/api/machine.py), and
`agentdeck inbox`: rooms owned and served in this process register themselves while they
serve and leave the registry when they stop; the inbox lists each serving room's waiting
calls, needs input first, read through each room's own socket, and a decision made from
what it lists applies in that room alone."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest

from engine.api.machine import read_machine
from engine.api.remote import RemoteClient
from engine.cli import main
from engine.config import load_config
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.rooms_registry import listing
from engine.runtime import Runtime
from tests.wait import until

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def served(path: Path, clock: Callable[[], float], toml: str = "") -> AsyncIterator[Runtime]:
    """A room owned and served here, with a shell call waiting."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "agentdeck.toml").write_text(toml)
    async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0),
                            clock=clock) as rt, serve_api(rt):  # fmt: skip
        await rt.submit(Message(origin="invoke", sender="op", thread_id=f"t-{path.name}",
                                text=f"run `echo {path.name}`"))  # fmt: skip
        yield rt


async def cli(*argv: str) -> int:
    """`agentdeck ARGV` in a thread (it runs an event loop of its own)."""
    return await anyio.to_thread.run_sync(main, list(argv))


async def test_the_inbox_of_every_room_needs_input_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = 1_800_000_000.0
    async with AsyncExitStack() as stack:
        # old: waits longest, no deadline; soon: a deadline; new: waits least
        for name, ago, toml in (("old", 600, ""), ("soon", 60, '[approvals]\ndeadline = "5m"\n'),
                                ("new", 30, "")):  # fmt: skip
            await stack.enter_async_context(
                served(tmp_path / name, lambda ago=ago: now - ago, toml))  # fmt: skip
        view = await until(read_machine, "three rooms, a call each",
                           ok=lambda v: len(v.calls) == 3 and [r.waiting for r in v.rooms] == [1, 1, 1])  # fmt: skip
        assert [c.label for c in view.calls] == ["soon", "old", "new"]
        soon = view.calls[0].call
        assert soon.deadline_at == now - 60 + 300
        assert {r.label: (r.owner, r.pid, r.running, r.waiting, r.decisions, r.kind)
                for r in view.rooms} == {n: ("serving", os.getpid(), 0, 1, 1, "run")
                                         for n in ("old", "soon", "new")}  # fmt: skip
        # decided from what the inbox lists, through its room's socket: applied there alone
        first = view.calls[1]
        client = RemoteClient(Room.at(first.room))
        done = await client.decide(Decision.approve(first.call.call_id, seen=first.call.args,
                                                    id="d-from-inbox"))  # fmt: skip
        assert done.status == "queued"
        after = await until(read_machine, "old's call decided",
                            ok=lambda v: [c.label for c in v.calls] == ["soon", "new"])  # fmt: skip
        assert [r.decisions for r in after.rooms] == [0, 1, 1]

        assert await cli("inbox") == 0
        out = capsys.readouterr().out
        assert "3 rooms · 3 serving" in out and "2 waiting, needs input first" in out
        assert out.index("soon") < out.index("new  c_")
        assert await cli("inbox", "--json") == 0
        data = json.loads(capsys.readouterr().out)
        assert [c["label"] for c in data["calls"]] == ["soon", "new"]
        assert data["calls"][0]["call"]["args_hash"] == soon.args_hash
    assert listing().rooms == []  # each left the registry as it stopped serving
    assert await cli("inbox") == 0
    assert "no room on this machine is registered" in capsys.readouterr().out


async def test_a_registry_that_cannot_be_written_is_said_and_the_room_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    (run / "agentdeck").write_text("a file where the registry's folder would be")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    with caplog.at_level(logging.WARNING, logger="agentdeck"):
        async with served(tmp_path / "room", lambda: 1.0) as rt:
            info = await RemoteClient(rt.room).info()  # served all the same
            assert info.pid == os.getpid()
    [said] = [r.getMessage() for r in caplog.records if "list of rooms" in r.getMessage()]
    assert "agentdeck inbox" in said and str(run / "agentdeck") in said
    assert load_config(rt.room.config) is not None
