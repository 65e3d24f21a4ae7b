"""A running call's output, streamed as it is produced (issue 31): ephemeral `CallOutput`
events from the runtime through the API's subscriptions, only to the clients that watch the
call's thread or the call, paced and cut (engine/turn/output.py), the stored result
unchanged; and what a client keeps of it (console/call_output.py), bounded."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.call_output import LINES, WIDTH, OutputTail
from engine.api.remote import RemoteClient
from engine.api.watch import ACTIVITY, COUNTS, QUEUE, Watch, thread
from engine.domain.events import CallOutput, Event
from engine.loops.server import serve_api
from engine.room import Room
from engine.tools import builtin
from engine.turn.output import PIECE, OutputPump, OutputTap
from tests.helpers import msg, runtime
from tests.scripted import first_then
from tests.wait import until

pytestmark = pytest.mark.anyio

# The real shell tool, without its approval (what is under test is its output, not the gate).
SHELL = dataclasses.replace(builtin.shell, approval="never")


def run(command: str) -> Any:
    return first_then([("shell", {"command": command, "timeout": 600})])


class Follower:
    """A client of the room's socket that follows `lanes`, keeping what it receives."""

    def __init__(self, lanes: list[str]) -> None:
        self.watch = Watch(lanes)
        self.events: list[Event] = []
        self.resyncs = 0  # times it was told it missed events

    async def resync(self) -> None:
        self.resyncs += 1

    def output(self) -> list[CallOutput]:
        return [e for e in self.events if isinstance(e, CallOutput)]

    def text(self) -> str:
        return "".join(e.text for e in self.output())

    async def follow(self, client: RemoteClient, *, task_status: Any) -> None:
        await client.follow(self.events.append, self.resync, watch=self.watch,
                            task_status=task_status)  # fmt: skip


async def test_output_streams_as_it_is_printed_to_the_threads_watchers_only(tmp_path: Path):
    """The watcher reads the first line while the command still runs (it waits for a file
    the test makes once the line arrived); a client watching the room's queue, counts,
    activity and another thread receives none of it; the stored result is the tool's."""
    command = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second >&2; echo third"
    async with runtime(tmp_path, run(command), tools=[SHELL], kind="run") as rt, serve_api(rt):
        room = Room.at(tmp_path / "room")
        watching = Follower([thread("t1")])
        other = Follower([QUEUE, COUNTS, ACTIVITY, thread("t2")])
        async with (
            RemoteClient(room) as a,
            RemoteClient(room) as b,
            anyio.create_task_group() as tg,
        ):
            await tg.start(watching.follow, a)
            await tg.start(other.follow, b)
            turn = await rt.submit(msg("go", "t1"))
            await until(watching.text, "the first line, while the command runs",
                        ok=lambda text: "first\n" in text)  # fmt: skip
            assert rt.room.workspace.joinpath("go").exists() is False  # (it does wait for it)
            rt.room.workspace.joinpath("go").touch()
            await rt.wait_turn(turn.turn_id)
            await until(lambda: [e.kind for e in other.events], "the call's end, in activity",
                        ok=lambda kinds: "call_changed" in kinds)  # fmt: skip
            tg.cancel_scope.cancel()
    by_stream = {s: "".join(e.text for e in watching.output() if e.stream == s)
                 for s in ("stdout", "stderr")}  # fmt: skip
    assert by_stream == {"stdout": "first\nthird\n", "stderr": "second\n"}
    assert len({e.call_id for e in watching.output()}) == 1
    assert other.output() == []
    assert ended_result(watching) == {"exit_code": 0, "stdout": "first\nthird\n",
                                      "stderr": "second\n"}  # fmt: skip


async def test_fifty_megabytes_stream_within_a_bound_and_the_result_stays_capped(tmp_path: Path):
    """A command printing 50 MB: the runtime and a watching client in this process hold a
    bounded amount whatever it prints (traced allocations), the watcher gets the output's
    tail with counts of what was skipped, and the result is the tool's capped text."""
    # 100 bursts of 500,000 bytes, a little apart: the output flows over many of the tap's
    # beats, as a long build's does
    line = "yes 'a line of output, printed again and again' | head -c 500000"
    command = f"for i in $(seq 100); do {line}; sleep 0.01; done"
    async with runtime(tmp_path, run(command), tools=[SHELL], kind="run") as rt, serve_api(rt):
        room = Room.at(tmp_path / "room")
        watching = Follower([thread("t1")])
        tail = OutputTail()
        async with RemoteClient(room) as a, anyio.create_task_group() as tg:
            await tg.start(watching.follow, a)
            tracemalloc.start()
            try:
                turn = await rt.submit(msg("flood", "t1"))
                await rt.wait_turn(turn.turn_id)
                await until(lambda: [e for e in watching.events if e.kind == "turn_changed"
                                     and e.status == "done"],  # type: ignore[union-attr]
                            "the turn's end, at the watcher")  # fmt: skip
                for event in watching.output():
                    tail.add(event.stream, event.text, event.skipped)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            tg.cancel_scope.cancel()
    sent = sum(len(e.text) + e.skipped for e in watching.output())
    assert sent == 50_000_000  # every character counted: shown, or said to be skipped
    assert all(len(e.text) <= PIECE for e in watching.output())
    assert peak < 40_000_000, f"{peak:,} bytes traced while 50 MB streamed"
    assert len(tail.lines) <= LINES
    assert tail.last(1)[0][0] == "stdout"  # (500,000 = 42 × 11,904 + 32: no burst ends a line)
    result = ended_result(watching)
    assert result["exit_code"] == 0 and result["stdout"].endswith(" bytes truncated]")


def ended_result(follower: Follower) -> dict[str, Any]:
    """The result of the call as its `succeeded` change carried it (what the room stored)."""
    ended = [e for e in follower.events if e.kind == "call_changed" and e.status == "succeeded"]  # type: ignore[union-attr]
    return json.loads(ended[-1].result)  # type: ignore[union-attr]


def test_the_tap_sends_the_newest_piece_and_counts_the_rest() -> None:
    sent: list[CallOutput] = []
    tap = OutputTap("c1", "t1", "u1", sent.append, lambda: 0.0, OutputPump(10**9, lambda: 0.0))
    tap.write("stdout", b"x" * (PIECE + 10) + b"\n")
    tap.write("stderr", "é".encode()[:1])  # half a character: kept until the rest comes
    tap.flush()
    tap.write("stderr", "é".encode()[1:])
    tap.flush()
    assert [(e.stream, len(e.text), e.skipped) for e in sent] == [
        ("stdout", PIECE, 11),
        ("stderr", 1, 0),
    ]
    assert sent[1].text == "é"


def test_the_runtime_wide_budget_holds_over_every_call() -> None:
    """Two calls over one budget of 100 characters a second: together they send 100 in the
    second (the second call its newest 20, the rest counted); once the budget is spent a
    call's output waits for the next second, with what comes meanwhile."""
    now = [0.0]
    budget = OutputPump(100, lambda: now[0])
    sent: list[CallOutput] = []
    one, two = (OutputTap(f"c{i}", "t", "u", sent.append, lambda: now[0], budget) for i in (1, 2))
    for tap in (one, two):
        tap.write("stdout", b"y" * 80)
        tap.flush()
    assert [(e.call_id, len(e.text), e.skipped) for e in sent] == [("c1", 80, 0), ("c2", 20, 60)]
    one.write("stdout", b"z" * 5)
    budget.flush()  # nothing left this second: it waits
    assert len(sent) == 2
    now[0] = 1.0
    one.write("stdout", b"z" * 5)
    budget.flush()  # the pump's next beat
    assert (sent[-1].call_id, sent[-1].text, sent[-1].skipped) == ("c1", "z" * 10, 0)
    one.close()
    budget.flush()
    assert len(sent) == 3  # nothing pending, nothing sent


@given(st.lists(st.tuples(st.sampled_from(["stdout", "stderr"]),
                          st.text(alphabet="ab\r\n\t", max_size=3000),
                          st.integers(0, 10**6)), max_size=40))  # fmt: skip
def test_a_clients_tail_stays_bounded_whatever_comes(pieces: list[tuple[str, str, int]]) -> None:
    tail = OutputTail()
    for stream, text, skipped in pieces:
        tail.add(stream, text, skipped)
    assert len(tail.lines) <= LINES
    assert all(len(line) <= WIDTH for _, line in tail.lines)
    assert all(len(line) <= WIDTH for line in tail.partial.values())
    assert len(tail.last(8)) <= 8


def test_a_progress_bar_rewrites_its_line() -> None:
    tail = OutputTail()
    tail.add("stdout", "building\n 10%\r 50%")
    tail.add("stdout", "\r100%\ndone\n")
    assert tail.last(5) == [("stdout", "building"), ("stdout", "100%"), ("stdout", "done")]
