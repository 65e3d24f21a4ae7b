"""Every worker's event bus carries the whole cluster's events (engine/cluster/relay.py): a
subscriber on one worker sees the turns another worker runs, each stored event once, in
order; rows whose ids commit out of order are not lost; a dropped connection is survived."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import anyio
import psycopg
import pytest

from engine.cluster.relay import GIVE_UP, Cursor, Relay
from engine.domain.decisions import Decision
from engine.domain.events import (
    CallChanged,
    Event,
    MessageAppended,
    TurnChanged,
    TurnStarted,
    event_json,
    parse_event,
)
from engine.runtime import Runtime
from tests.helpers import msg, on
from tests.scripted import first_then
from tests.test_cluster_runtime import workers
from tests.wait import until

pytestmark = pytest.mark.anyio

UNSTORED = ("text_delta", "step_started")  # published only: they do not cross workers


async def stored(rt: Runtime, turn_id: str) -> list[Event]:
    """What the database holds of a turn: its events and its conversation entries."""
    events = [parse_event(r[0]) for r in await on(rt.store).fetchall(
        "SELECT body FROM events WHERE turn_id = ? ORDER BY id", (turn_id,))]  # fmt: skip
    entries = [
        MessageAppended(at=r[4], thread_id=r[0], turn_id=turn_id, role=r[2], text=r[3], seq=r[1])
        for r in await on(rt.store).fetchall(
            "SELECT thread_id, seq, role, text, created_at FROM messages WHERE turn_id = ?"
            " ORDER BY id",
            (turn_id,),
        )  # fmt: skip
    ]
    return [*events, *entries]


def milestones(seen: list[Event], turn_id: str) -> list[str]:
    """The turn's start, its calls waiting, and its status changes, as one subscriber saw."""
    out = []
    for e in seen:
        if e.turn_id != turn_id:
            continue
        match e:
            case TurnStarted():
                out.append("started")
            case CallChanged(status="suspended"):
                out.append("call suspended")
            case TurnChanged():
                out.append(f"turn {e.status.value}")
    return out


def counted(events: list[Event]) -> Counter[str]:
    return Counter(event_json(e) for e in events if e.kind not in UNSTORED)


async def test_a_subscriber_on_one_worker_sees_the_turn_another_runs(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    polls: Counter[str] = Counter()  # polls each relay finished, by its name
    real_poll = Relay.poll

    async def counted_poll(self: Relay) -> bool:
        full = await real_poll(self)
        polls[self.application_name] += 1
        return full

    monkeypatch.setattr(Relay, "poll", counted_poll)
    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        assert a.coordinator is not None and b.coordinator is not None
        seen_a: list[Event] = []
        seen_b: list[Event] = []
        a.subscribe(seen_a.append)
        b.subscribe(seen_b.append)
        async with a.coordinator._claim_lock:  # a claims nothing: b runs the turn, and resumes it
            handle = await b.submit(msg("run it", thread="x"))
            outcome = await b.wait_turn(handle.turn_id)
            assert outcome.status == "waiting"
            turn_id, call_id = handle.turn_id, outcome.pending[0]["call_id"]
            await until(lambda: milestones(seen_a, turn_id), "a sees the call suspended",
                        ok=lambda seen: "call suspended" in seen)  # fmt: skip
            row = await on(a.store).fetchone("SELECT args FROM tool_calls WHERE id = ?", (call_id,))
            assert await a.decide(Decision.approve(call_id, seen=json.loads(row[0]))) == "queued"
            assert (await b.wait_turn(turn_id)).status == "done"
            await until(lambda: milestones(seen_a, turn_id), "a sees the turn done",
                        ok=lambda seen: "turn done" in seen)  # fmt: skip
        ran = await on(a.store).fetchall("SELECT DISTINCT run_id FROM steps WHERE turn_id = ?",
                                     (turn_id,))  # fmt: skip
        assert [r[0] for r in ran] == [b.run_id], "b ran every step of the turn"
        assert milestones(seen_a, turn_id) == milestones(seen_b, turn_id) == [
            "started", "call suspended", "turn waiting", "turn running", "turn done"]  # fmt: skip
        relays = [f"agentdeck-relay {rt.coordinator.name}"[:63] for rt in (a, b)]
        before = Counter(polls)
        await until(lambda: Counter(polls), "two more polls of each relay",  # nothing handed twice
                    ok=lambda now: all(now[r] >= before[r] + 2 for r in relays))  # fmt: skip
        truth = counted(await stored(a, turn_id))
        assert counted([e for e in seen_a if e.turn_id == turn_id]) == truth
        assert counted([e for e in seen_b if e.turn_id == turn_id]) == truth
        assert not any(e.kind == "text_delta" for e in seen_a), "deltas stay where they ran"


async def test_the_run_log_keeps_to_its_own_worker(tmp_path: Path, pg_url: str) -> None:
    async with workers(tmp_path, pg_url, 2) as (a, b):
        assert a.coordinator is not None
        everything: list[Event] = []
        own: list[Event] = []
        a.subscribe(everything.append)
        a.subscribe(own.append, relayed=False)
        async with a.coordinator._claim_lock:
            handle = await b.submit(msg("hello", thread="y"))
            assert (await b.wait_turn(handle.turn_id)).status == "done"
        await until(lambda: milestones(everything, handle.turn_id), "the turn done, relayed",
                    ok=lambda seen: "turn done" in seen)  # fmt: skip
        assert [e for e in own if e.turn_id == handle.turn_id] == []


async def test_the_relay_connects_again_after_its_connection_drops(tmp_path: Path,
                                                                    pg_url: str) -> None:  # fmt: skip
    async with workers(tmp_path, pg_url, 2) as (a, b):
        assert a.coordinator is not None
        seen: list[Event] = []
        a.subscribe(seen.append)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s", (f"agentdeck-relay {a.coordinator.name}",))  # fmt: skip
            assert [r[0] for r in await cur.fetchall()] == [True]
        async with a.coordinator._claim_lock:
            handle = await b.submit(msg("after the drop", thread="z"))
            assert (await b.wait_turn(handle.turn_id)).status == "done"
        await until(lambda: milestones(seen, handle.turn_id), "the turn done, relayed anyway",
                    ok=lambda seen: "turn done" in seen)  # fmt: skip
        assert milestones(seen, handle.turn_id) == ["started", "turn done"]


async def test_the_api_event_stream_of_one_worker_carries_the_others_turns(
    tmp_path: Path, pg_url: str
) -> None:
    from engine.api.remote import RemoteClient
    from engine.loops.server import serve_api
    from engine.room import Room

    async def resync() -> None:
        pass

    async with workers(tmp_path, pg_url, 2) as (a, b), serve_api(a):
        assert a.coordinator is not None
        streamed: list[Event] = []
        async with (
            RemoteClient(Room.at(tmp_path / "w0")) as client,
            anyio.create_task_group() as tg,
        ):
            await tg.start(client.follow, streamed.append, resync)
            async with a.coordinator._claim_lock:
                handle = await b.submit(msg("through the stream", thread="s"))
                assert (await b.wait_turn(handle.turn_id)).status == "done"
            await until(lambda: milestones(streamed, handle.turn_id), "the turn done, streamed",
                        ok=lambda seen: "turn done" in seen)  # fmt: skip
            assert milestones(streamed, handle.turn_id) == ["started", "turn done"]
            tg.cancel_scope.cancel()


# -- the cursor: ids that commit after higher ones --------------------------------------------


def test_a_skipped_id_is_asked_for_until_it_shows_up_or_is_given_up() -> None:
    cursor = Cursor(10, [], now=0.0)
    cursor.read([11, 14], now=1.0)
    assert (cursor.top, sorted(cursor.missing)) == (14, [12, 13])
    cursor.read([12, 15], now=2.0)
    assert (cursor.top, sorted(cursor.missing)) == (15, [13])
    cursor.read([], now=1.0 + GIVE_UP + 0.1)  # a rolled-back write's id never shows up
    assert cursor.missing == {}


async def test_an_event_committed_after_a_higher_id_is_relayed(
    tmp_path: Path, pg_url: str, pg_pool
) -> None:
    """Two writers: the first takes its id, the second takes the next and commits first;
    the relay reads the second, then (next poll) the first: both reach it, once each."""
    async with workers(tmp_path, pg_url, 1):  # (the schema)
        pass
    handed: list[Event] = []
    relay = Relay(pg_pool, "me", handed.extend, application_name="test-relay")
    insert = ("INSERT INTO events(at, run_id, thread_id, turn_id, kind, body)"
              " VALUES (%s, 'other', 't', %s, 'turn_started', %s)")  # fmt: skip

    def body(turn: str) -> str:
        return event_json(TurnStarted(at=1.0, thread_id="t", turn_id=turn, origin="invoke",
                                      sender="x", text=turn))  # fmt: skip

    async with (await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as slow,
                await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as fast):  # fmt: skip
        await relay.start()
        try:
            async with slow.transaction():
                await slow.execute(insert, (1.0, "slow", body("slow")))
                await fast.execute(insert, (2.0, "fast", body("fast")))
                await relay.poll()
                assert [e.turn_id for e in handed] == ["fast"]
            await relay.poll()
            await relay.poll()
            assert [e.turn_id for e in handed] == ["fast", "slow"]
            assert relay.events is not None and relay.events.missing == {}
        finally:
            await relay._close()
