"""Subscriptions (issue 27): a stream receives only the lanes it watches, each lane has its
own ring (a noisy thread cannot push the queue out), resync is per stream, and a watch
changed while following applies from then on, in process and over the API."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.api.client import RoomClient
from engine.api.hub import EventHub
from engine.api.local import LocalClient
from engine.api.models import SubmitBody
from engine.api.remote import RemoteClient
from engine.api.watch import Lanes, Watch, lane_problem
from engine.domain.events import (
    CallChanged,
    DecisionRecorded,
    Event,
    StepStarted,
    TextDelta,
    TurnStarted,
)
from engine.lifecycle import CallStatus, DecisionStatus
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from tests.wait import until


def body(text: str, thread: str) -> SubmitBody:
    return SubmitBody(origin="invoke", sender="test", thread_id=thread, text=text)


def delta(thread: str, text: str = "x") -> TextDelta:
    return TextDelta(at=0.0, thread_id=thread, turn_id="t", text=text)


def call(status: CallStatus, call_id: str = "c1", thread: str = "a") -> CallChanged:
    return CallChanged(at=0.0, thread_id=thread, turn_id="t", call_id=call_id, tool="shell",
                       status=status)  # fmt: skip


def kinds(batch: list[str] | None) -> list[str]:
    assert batch is not None
    return [json.loads(item)["kind"] for item in batch]


def test_lanes_of_each_kind_of_event() -> None:
    lanes = Lanes()
    assert lanes.of(delta("a")) == ["all", "thread:a"]
    assert "queue" in lanes.of(call(CallStatus.SUSPENDED))
    assert "queue" in lanes.of(call(CallStatus.RUNNING))  # leaves suspended: the queue's
    assert "queue" not in lanes.of(call(CallStatus.SUCCEEDED))  # never suspended since
    assert set(lanes.of(call(CallStatus.RUNNING, "c2"))) == {"all", "thread:a", "activity",
                                                             "call:c2"}  # fmt: skip
    started = TurnStarted(at=0.0, thread_id="a", turn_id="t", origin="chat", sender="op", text="")
    assert "counts" in lanes.of(started)
    decided = DecisionRecorded(at=0.0, thread_id="a", decision_id="d", call_id="c1",
                               action="approve", status=DecisionStatus.QUEUED)  # fmt: skip
    assert {"queue", "call:c1"} <= set(lanes.of(decided))
    step = StepStarted(at=0.0, thread_id="a", turn_id="t", step_id=1, step_kind="inference")
    assert "activity" in lanes.of(step)


def test_a_stream_reads_only_its_lanes_once_each_in_order() -> None:
    hub = EventHub("r", size=100)
    mine, _ = hub.open(["thread:a", "queue"], None, 0)
    hub.publish(delta("b"))
    assert not mine.ready.is_set()  # another thread's event does not wake it
    hub.publish(call(CallStatus.SUSPENDED, thread="a"))  # in both its lanes
    hub.publish(delta("a"))
    assert mine.ready.is_set()
    assert kinds(hub.read(mine, 100)) == ["call_changed", "text_delta"]
    assert mine.cursor == hub.head and not mine.ready.is_set()


def test_a_noisy_thread_does_not_push_the_queue_out() -> None:
    """The issue's case: one ring of 10,000 shared by all, and a noisy thread made every
    client resynchronise; now the queue keeps its own ring."""
    hub = EventHub("r", size=100)
    queue, _ = hub.open(["queue"], None, 0)
    everything, _ = hub.open(["all"], None, 0)
    hub.publish(call(CallStatus.SUSPENDED))
    for _ in range(1_000):
        hub.publish(delta("noisy"))
    assert kinds(hub.read(queue, 100)) == ["call_changed"]
    assert hub.read(everything, 100) is None  # the `all` ring dropped what it had not read
    assert everything.cursor == hub.head  # and it goes on from now


def test_resume_after_a_reconnect_and_resync_when_a_watched_lane_lost_events() -> None:
    hub = EventHub("r", size=100)
    first, resync = hub.open(["queue"], None, 0)
    assert not resync
    hub.publish(call(CallStatus.SUSPENDED))
    hub.read(first, 100)
    cursor = first.cursor
    hub.release(first)
    hub.publish(call(CallStatus.SUSPENDED, "c2"))
    again, resync = hub.open(["queue"], "r", cursor)
    assert not resync and kinds(hub.read(again, 100)) == ["call_changed"]
    gone, resync = hub.open(["all"], "r", 0)  # `all` kept only 100: the first is gone
    hub.release(gone)
    for _ in range(200):
        hub.publish(delta("a"))
    _, resync = hub.open(["all"], "r", cursor)
    assert resync
    _, resync = hub.open(["queue"], "another run", cursor)
    assert resync


def test_a_lane_added_to_a_resumed_watch_starts_at_the_cursor() -> None:
    """The events of a thread added to a watch, published after the client's cursor while
    it reconnected, come from the `all` ring; never a resync for a lane just added."""
    hub = EventHub("r", size=100)
    s, _ = hub.open(["queue"], None, 0)
    hub.publish(call(CallStatus.SUSPENDED))
    hub.read(s, 100)
    cursor = s.cursor
    hub.release(s)
    hub.publish(delta("a", "while reconnecting"))
    s, resync = hub.open(["queue", "thread:a"], "r", cursor, fresh=["thread:a"])
    assert not resync
    hub.publish(delta("a", "after"))
    texts = [json.loads(i)["text"] for i in hub.read(s, 100) or []]
    assert texts == ["while reconnecting", "after"]
    for _ in range(300):
        hub.publish(delta("b"))
    s, resync = hub.open(["thread:c"], "r", cursor, fresh=["thread:c"])
    assert not resync  # gone from `all`, but nothing of a lane just added is owed


def test_per_thread_lanes_nobody_watches_are_bounded() -> None:
    hub = EventHub("r", size=100)
    for n in range(500):
        s, _ = hub.open([f"thread:{n}"], None, 0)
        hub.release(s)
    assert len(hub._lanes) <= 5 + 64


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(list(CallStatus))),
                max_size=60), st.integers(1, 7))  # fmt: skip
def test_merged_lanes_are_the_filtered_all_lane(
    events: list[tuple[str, CallStatus]], limit: int
) -> None:
    """What a stream of some lanes reads, batch by batch, is exactly `all` filtered by
    those lanes, in order, each event once."""
    hub = EventHub("r", size=1_000)
    watched = ["thread:a", "queue", "activity"]
    s, _ = hub.open(watched, None, 0)
    lanes = Lanes()
    expected = []
    for n, (thread, status) in enumerate(events):
        event = call(status, f"c{n % 5}", thread)
        hub.publish(event)
        if Watch(watched).wants(lanes.of(event)):
            expected.append(event.model_dump_json())
    got: list[str] = []
    while batch := hub.read(s, limit):
        got += batch
    assert got == expected


def test_lane_names_are_checked() -> None:
    assert lane_problem("queue") is None and lane_problem("thread:x") is None
    assert lane_problem("thread:") and lane_problem("bogus") and lane_problem("call:" + "x" * 5_000)
    with pytest.raises(ValueError):
        Watch(["nope"])


# -- over a runtime: in process and over the API ---------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["local", "remote"])
async def test_a_client_receives_what_it_watches_and_a_changed_watch_applies(
    tmp_path: Path, form: str
) -> None:
    """A client watching the queue and counts gets a suspended call of thread a, nothing of
    thread b's chat; after it adds thread b, b's next turn streams to it, with no resync."""
    room = tmp_path / "room"
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt, \
            serve_api(rt):  # fmt: skip
        client: RoomClient = LocalClient(rt) if form == "local" else RemoteClient(Room.at(room))
        events: list[Event] = []
        resyncs: list[int] = []

        async def resync() -> None:
            resyncs.append(len(events))

        watch = Watch(["queue", "counts"])
        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(client.follow, events.append, resync, watch=watch))
            await client.submit(body("hello there", thread="b"))
            await client.submit(body("run `echo hi`", thread="a"))
            await until(lambda: [e for e in events if e.kind == "call_changed"],
                        "the queue's call")  # fmt: skip
            await until(lambda: client.pending(), "a call waits")
            assert {e.kind for e in events} <= {"turn_started", "turn_changed", "call_changed"}
            assert all(e.thread_id == "a" for e in events if e.kind == "call_changed")
            watch.set(["queue", "counts", "thread:b"])
            seen = len(events)
            await client.submit(body("hello again", thread="b"))
            await until(lambda: [e for e in events[seen:] if e.kind == "message_appended"
                                 and e.thread_id == "b" and e.role == "assistant"],  # type: ignore[union-attr]
                        "thread b's answer")  # fmt: skip
            assert not [e for e in events if e.kind == "message_appended" and e.thread_id == "a"]
            assert resyncs == []
            tg.cancel_scope.cancel()
        await client.aclose()


def test_a_console_showing_a_thread_no_lane_can_name_watches_everything() -> None:
    """Found by tests/fuzz/test_hostile_console.py: a thread id longer than a lane takes
    made the console's watch raise, and the app ended."""
    from console.state import WATCHED, DeckState

    state = DeckState()
    state.show_thread("t1")
    assert state.lanes() == [*WATCHED, "thread:t1"]
    state.show_thread("x" * 5_000)
    assert state.lanes() == ["all"]
    Watch(state.lanes())  # a watch takes it
