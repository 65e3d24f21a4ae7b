"""Several runtimes as workers of one cluster (engine/cluster/member.py), in one process:
each has a room of its own and shares one PostgreSQL database with the others."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest

from engine.config import ClusterConfig, Config, StoreConfig
from engine.decisions import Decision
from engine.runtime import Runtime
from engine.store import StoreError
from tests.helpers import msg
from tests.scripted import Reply, ScriptedModel, add, after_tools, first_then, shell

pytestmark = pytest.mark.anyio


def cluster_config(url: str, name: str, lease: float = 2.0) -> Config:
    return Config(store=StoreConfig(url=url),
                  cluster=ClusterConfig(enabled=True, worker=name, lease_seconds=lease))  # fmt: skip


def answer(request) -> Reply:  # noqa: ANN001
    if after_tools(request.messages):
        return Reply(text="done")
    return Reply(text="no tools")


@asynccontextmanager
async def workers(
    tmp_path: Path, url: str, n: int, script=answer, **kw
) -> AsyncIterator[list[Runtime]]:  # noqa: ANN001, ANN003
    async with AsyncExitStack() as stack:
        rts = []
        for i in range(n):
            rt = await stack.enter_async_context(Runtime.open(
                tmp_path / f"w{i}", kind="run", provider=ScriptedModel(script), tools=[add, shell],
                config=cluster_config(url, f"w{i}", **kw)))  # fmt: skip
            rts.append(rt)
        yield rts


async def until(check, timeout: float = 10.0):  # noqa: ANN001, ANN201
    with anyio.fail_after(timeout):
        while not (found := await check()):
            await anyio.sleep(0.02)
        return found


async def test_turns_submitted_to_one_worker_spread_and_each_runs_once(tmp_path, pg_url):
    async with workers(tmp_path, pg_url, 2) as (a, b):
        handles = [await a.submit(msg(f"hello {i}", thread=f"t{i}")) for i in range(12)]
        for h in handles:
            outcome = await a.wait_turn(h.turn_id)
            assert outcome.status == "done"
        rows = await a.store.fetchall(
            "SELECT t.thread_id, count(*), min(r.kind) FROM turns t JOIN runs r ON r.id = t.run_id"
            " GROUP BY t.thread_id")  # fmt: skip
        assert len(rows) == 12 and all(r[1] == 1 for r in rows)
        runs = await a.store.fetchall("SELECT DISTINCT run_id FROM turns")
        assert {r[0] for r in runs} <= {a.run_id, b.run_id}


async def test_a_decision_through_another_worker_resumes_the_call(tmp_path, pg_url):
    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        handle = await a.submit(msg("run it", thread="x"))
        outcome = await a.wait_turn(handle.turn_id)
        assert outcome.status == "waiting"
        call_id = outcome.pending[0]["call_id"]
        row = await b.store.fetchone("SELECT args FROM tool_calls WHERE id = ?", (call_id,))
        assert await b.decide(Decision.approve(call_id, args=json.loads(row[0]))) == "queued"
        done = await b.wait_turn(handle.turn_id)
        assert done.status == "done"
        ran = await a.store.fetchall("SELECT status, result FROM tool_calls WHERE turn_id = ?",
                                     (handle.turn_id,))  # fmt: skip
        assert [r[0] for r in ran] == ["succeeded"]


async def test_a_one_off_runtime_is_refused_on_a_cluster(tmp_path, pg_url):
    with pytest.raises(StoreError, match="one-off"):
        async with Runtime.open(tmp_path / "x", provider=ScriptedModel(answer),
                                config=cluster_config(pg_url, "x"), resume="none"):  # fmt: skip
            pass


async def test_a_cluster_on_sqlite_is_refused(tmp_path):
    config = Config(cluster=ClusterConfig(enabled=True))
    with pytest.raises(StoreError, match="PostgreSQL"):
        async with Runtime.open(tmp_path / "x", provider=ScriptedModel(answer), config=config):
            pass
