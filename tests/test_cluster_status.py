"""What an operator sees of a cluster (issue 18): two workers on one PostgreSQL database,
in this process, each running turns held open by a tool until the test lets them go.
Through the API of one of them (GET /v1/cluster, the scheduler across workers) and
`agentdeck status`, the workers show with their leases and heartbeats and every thread
with the worker running it; a worker that stopped shows as stopped and dead. A room that
is not a cluster's says nothing new."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.local import LocalClient
from engine.api.remote import RemoteClient
from engine.cli import main, workers
from engine.domain.cluster_view import MAX_LISTED, ClusterView, WorkerView
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools import Tool, tool
from tests.helpers import msg
from tests.scripted import ScriptedModel, first_then
from tests.test_cluster_runtime import cluster_config
from tests.wait import until

pytestmark = pytest.mark.anyio


def holding() -> tuple[Tool, anyio.Event]:
    """A tool whose calls wait until the event is set: their turns run until then."""
    gate = anyio.Event()

    @tool
    async def hold(tag: str) -> str:
        """Wait for the test."""
        await gate.wait()
        return tag

    return hold, gate


@asynccontextmanager
async def worker(tmp_path: Path, url: str, name: str, hold: Tool) -> AsyncIterator[Runtime]:
    async with Runtime.open(tmp_path / name, kind="run", tools=[hold],
                            provider=ScriptedModel(first_then([("hold", {"tag": name})])),
                            config=cluster_config(url, name)) as rt:  # fmt: skip
        yield rt


def threads_of(stats: Any) -> dict[str, tuple[str, str | None]]:
    return {t.thread_id: (t.state, t.worker) for t in stats.threads}


def cli(rt: Runtime, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--room", str(rt.room.path), *args])
    return code, capsys.readouterr().out


def running_on(client: LocalClient) -> Callable[[], Any]:
    """A probe for `until`: the running threads, each with its worker."""

    async def probe() -> dict[str, str]:
        view = await client.cluster()
        assert view is not None
        return {t.thread_id: t.worker for t in view.threads if t.state == "running"}

    return probe


async def test_status_and_the_scheduler_show_every_worker_and_what_it_runs(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hold, gate = holding()
    expected = {"a1": "w0", "a2": "w0", "b1": "w1"}
    async with worker(tmp_path, pg_url, "w0", hold) as a, serve_api(a):
        local = LocalClient(a)
        handles = [await a.submit(msg("go", thread=t)) for t in ("a1", "a2")]  # w0 is alone
        await until(running_on(local), "a1 and a2 run on w0",
                    ok=lambda got: got == {"a1": "w0", "a2": "w0"})  # fmt: skip
        async with worker(tmp_path, pg_url, "w1", hold) as b:
            assert a.coordinator is not None
            async with a.coordinator._claim_lock:  # w0 claims nothing meanwhile: b1 goes to w1
                handles.append(await b.submit(msg("go", thread="b1")))
                await until(running_on(local), "each thread runs on its worker",
                            ok=lambda got: got == expected)  # fmt: skip

            view = await local.cluster()
            assert view is not None and (view.worker, view.lease_seconds) == ("w0", 2.0)
            w0, w1 = view.workers
            assert (w0.id, w0.state, w0.alive, w0.leases, w0.threads) == (
                "w0", "running", True, 2, ("a1", "a2"))  # fmt: skip
            assert (w1.id, w1.state, w1.alive, w1.leases, w1.threads) == (
                "w1", "running", True, 1, ("b1",))  # fmt: skip
            assert w0.heartbeat_age < view.lease_seconds and w0.pid == w1.pid > 0

            # the scheduler across workers, in the owner's process and over its API
            stats = await local.statistics()
            assert stats.worker == "w0"
            assert threads_of(stats) == {t: ("running", w) for t, w in expected.items()}
            async with RemoteClient(a.room) as remote:
                seen = await remote.cluster()
                assert seen is not None and [w.id for w in seen.workers] == ["w0", "w1"]
                assert [w.threads for w in seen.workers] == [("a1", "a2"), ("b1",)]
                over_api = await remote.statistics()
                assert over_api.worker == "w0" and threads_of(over_api) == threads_of(stats)
            # the other worker sees the same cluster, from its side
            from_b = await LocalClient(b).statistics()
            assert from_b.worker == "w1" and threads_of(from_b) == threads_of(stats)

            def status() -> None:
                code, out = cli(a, capsys, "status")
                assert code == 0
                assert "3 running, 0 waiting, 0 queued" in out
                lines = out.splitlines()
                at = next(i for i, ln in enumerate(lines) if ln.startswith("cluster:"))
                assert lines[at].startswith("cluster: 2 of 2 workers alive, 3 threads leased")
                assert lines[at].endswith("this room's runtime is worker w0")
                head, one, two = (ln.split() for ln in lines[at + 1 : at + 4])
                assert head == ["worker", "host", "pid", "state", "alive", "heartbeat",
                                "leases", "threads"]  # fmt: skip
                assert one[:2] == ["w0", "*"] and one[4:6] == ["running", "alive"]
                assert one[-3:] == ["2", "a1,", "a2"]
                assert two[0] == "w1" and two[3:5] == ["running", "alive"]
                assert two[-2:] == ["1", "b1"]
                code, out = cli(a, capsys, "status", "--json")
                data = json.loads(out)
                assert (data["running"], data["cluster"]["worker"]) == (3, "w0")
                listed = {w["id"]: (w["alive"], w["leases"], w["threads"])
                          for w in data["cluster"]["workers"]}  # fmt: skip
                assert listed == {"w0": (True, 2, ["a1", "a2"]), "w1": (True, 1, ["b1"])}

            await anyio.to_thread.run_sync(status)
            gate.set()
            for h in handles:
                assert (await a.wait_turn(h.turn_id)).status == "done"

        # w1 stopped: it is listed as such, dead, with no lease; nothing runs
        view = await local.cluster()
        assert view is not None
        w1 = next(w for w in view.workers if w.id == "w1")
        assert (w1.state, w1.alive, w1.leases, w1.threads) == ("stopped", False, 0, ())
        assert all(t.state == "idle" for t in view.threads)

        def stopped() -> None:
            code, out = cli(a, capsys, "status")
            assert code == 0 and "cluster: 1 of 2 workers alive" in out
            row = next(ln for ln in out.splitlines() if ln.split()[:1] == ["w1"])
            assert row.split()[3:5] == ["stopped", "dead"] and row.split()[-2:] == ["0", "—"]

        await anyio.to_thread.run_sync(stopped)


async def test_a_room_that_is_not_a_cluster_says_nothing_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Runtime.open(tmp_path / "room", kind="run",
                            provider=OfflineModel(delay=0)) as rt, serve_api(rt):  # fmt: skip
        assert await LocalClient(rt).cluster() is None
        assert (await LocalClient(rt).statistics()).worker is None
        async with RemoteClient(rt.room) as remote:
            assert await remote.cluster() is None

        def status() -> None:
            code, out = cli(rt, capsys, "status")
            assert code == 0 and "cluster" not in out and "worker" not in out
            code, out = cli(rt, capsys, "status", "--json")
            assert "cluster" not in json.loads(out)

        await anyio.to_thread.run_sync(status)


def test_a_worker_with_many_leases_names_the_first_and_counts_the_rest() -> None:
    named = tuple(f"t{i:02d}" for i in range(MAX_LISTED))
    busy = WorkerView(id="w0", host="h", pid=1, state="running", alive=True, started_at=0.0,
                      heartbeat_at=0.0, heartbeat_age=75.0, leases=30, threads=named)  # fmt: skip
    text = workers.lines(ClusterView(worker="w0", lease_seconds=30.0, workers=(busy,),
                                     threads=()))  # fmt: skip
    assert text[0].startswith("cluster: 1 of 1 worker alive, 30 threads leased (leases last 30s)")
    row = text[2].split()
    assert row[:7] == ["w0", "*", "h", "1", "running", "alive", "1m15s"]
    assert row[-11:] == ["30", *(f"t{i:02d}," for i in range(7)), "t07", "(+22", "more)"]
    as_json = json.loads(json.dumps(workers.as_json(ClusterView("w0", 30.0, (busy,), ()))))
    assert as_json["workers"][0]["threads"] == list(named)
