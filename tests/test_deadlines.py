"""Approval deadlines (issue 15): a suspended call waits at most its configured time, the
most specific one (tool, then group, then the default); then `on_deadline` applies,
recorded as decided by `deadline`, through the normal decision path. Time is a fake clock
whose sleeps wake only when the test moves it."""

from __future__ import annotations

import math
from pathlib import Path

import anyio
import pytest

from engine.config import ApprovalsConfig, Config, ConfigError, load_config, parse_duration
from engine.decisions.deadline import deadline_for
from engine.lifecycle.call import REVIEW_REASON
from engine.providers.offline import OfflineModel
from engine.services.deadlines import duration
from engine.tools.builtin import builtin_tools
from tests.helpers import msg, room_rows, room_write, rows, runtime
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

T0 = 1_800_000_000.0


class FakeTime:
    """A clock that moves only by `advance`; a sleep ends once the clock passes its end."""

    def __init__(self, now: float = T0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        woken = anyio.Event()
        self._sleepers.append((self.now + seconds, woken))
        await woken.wait()

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for entry in list(self._sleepers):
            if entry[0] <= self.now:
                self._sleepers.remove(entry)
                entry[1].set()
        await anyio.wait_all_tasks_blocked()


def toml(tmp_path: Path, text: str) -> Config:
    room = tmp_path / "room"
    room.mkdir(exist_ok=True)
    (room / "agentdeck.toml").write_text(text)
    return load_config(room / "agentdeck.toml")


def offline(tmp_path: Path, time: FakeTime, **kw):
    return runtime(tmp_path, OfflineModel(), builtin_tools(), clock=time.clock, sleep=time.sleep,
                   **kw)  # fmt: skip


async def decided(rt, call_id: str) -> list[tuple]:
    return await rows(rt, "SELECT action, decided_by, reason, args_hash IS NOT NULL, status"
                          " FROM decisions WHERE call_id=?", call_id)  # fmt: skip


# What a test waits for once the clock passed a deadline: the timer's read and write go
# through the store's thread, which wait_all_tasks_blocked does not wait for.
APPLIED = "a decision on the call applied"


def applied(decisions: list[tuple]) -> bool:
    return any(d[-1] == "applied" for d in decisions)


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.one_store("no store: durations alone")
def test_durations_parse_and_bad_ones_are_one_line_errors(tmp_path):
    assert [parse_duration(v) for v in ("90s", "10m", "2h", "1h30m", "1d", 45)] == [
        90, 600, 7200, 5400, 86400, 45]  # fmt: skip
    assert parse_duration("none") == math.inf
    assert duration(90) == "1m30s" and duration(7200) == "2h" and duration(3) == "3s"
    for bad, says in (('"10 minutes"', 'a duration is like "90s"'), ('"0s"', "more than 0"),
                      ('"-5m"', 'a duration is like'), ('"31d"', "at most 30 days")):  # fmt: skip
        with pytest.raises(ConfigError) as err:
            toml(tmp_path, f"[approvals]\ndeadline = {bad}\n")
        assert "[approvals.deadline]" in str(err.value) and says in str(err.value)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"\[approvals.on_deadline\]"):
        toml(tmp_path, '[approvals]\non_deadline = "run"\n')
    with pytest.raises(ConfigError, match=r"\[approvals.tools.shell.deadlin\]"):
        toml(tmp_path, '[approvals.tools.shell]\ndeadlin = "5m"\n')


async def test_an_unknown_tool_or_group_in_approvals_is_an_error_at_start(tmp_path):
    time = FakeTime()
    for section, says in (("tools.shel", "unknown tool 'shel'"),
                          ("groups.chats", "unknown group 'chats'")):  # fmt: skip
        toml(tmp_path, f'[approvals.{section}]\ndeadline = "5m"\n')
        with pytest.raises(ConfigError, match=says):
            async with offline(tmp_path, time):
                pass
    # a group the file configures is known
    toml(tmp_path, '[groups.ops]\npriority = 5\n[approvals.groups.ops]\ndeadline = "5m"\n')
    async with offline(tmp_path, time):
        pass


def test_the_tool_deadline_beats_the_group_and_the_default():
    approvals = ApprovalsConfig.model_validate({
        "deadline": "1h", "on_deadline": "cancel",
        "tools": {"shell": {"deadline": "10m"}, "read_file": {"deadline": "none"},
                  "write_file": {"on_deadline": "approve"}},
        "groups": {"task": {"deadline": "30m", "on_deadline": "approve"}},
    })  # fmt: skip
    assert deadline_for(approvals, "shell", "task") == (
        deadline_for(approvals, "shell", "chat").__class__(600, "approve", "approvals.tools.shell")
    )
    assert deadline_for(approvals, "shell", "chat").on_deadline == "cancel"  # type: ignore[union-attr]
    assert deadline_for(approvals, "http_get", "task").seconds == 1800  # type: ignore[union-attr]
    assert deadline_for(approvals, "http_get", "chat").seconds == 3600  # type: ignore[union-attr]
    assert deadline_for(approvals, "read_file", "task") is None  # "none" turns it off
    write = deadline_for(approvals, "write_file", "chat")
    assert write is not None and (write.seconds, write.on_deadline) == (3600, "approve")
    assert deadline_for(ApprovalsConfig(), "shell", "chat") is None  # default: none


# -- in a running room --------------------------------------------------------------------------


async def test_at_the_deadline_the_call_is_cancelled_and_recorded_as_decided_by_deadline(tmp_path):
    toml(tmp_path, '[approvals]\ndeadline = "1h"\n[approvals.tools.shell]\ndeadline = "10m"\n')
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
        assert (call.deadline_at, call.on_deadline, call.group) == (T0 + 600, "cancel", "chat")
        await time.advance(599)
        assert await decided(rt, call.call_id) == []
        await time.advance(1)
        await until(lambda: decided(rt, call.call_id), APPLIED, ok=applied)
        done = await rt.wait_turn(out.turn_id)
        [(action, by, reason, bound, status)] = await decided(rt, call.call_id)
        assert (action, by, bound, status) == ("cancel", "deadline", False, "applied")
        assert "deadline passed (10m, approvals.tools.shell)" in reason
        assert done.calls[0]["status"] == "cancelled"
        assert await rt.pending() == []


async def test_a_deadline_approval_is_bound_to_the_calls_arguments(tmp_path):
    toml(tmp_path, '[approvals]\ndeadline = "90s"\non_deadline = "approve"\n')
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
        await time.advance(90)
        await until(lambda: decided(rt, call.call_id), APPLIED, ok=applied)
        done = await rt.wait_turn(out.turn_id)
        [(action, by, _, bound, status)] = await decided(rt, call.call_id)
        assert (action, by, bound, status) == ("resume", "deadline", True, "applied")
        [(args_hash,)] = await rows(rt, "SELECT args_hash FROM decisions")
        assert args_hash == call.args_hash
        assert done.calls[0]["status"] == "succeeded"


async def test_the_group_deadline_applies_where_the_tool_has_none(tmp_path):
    toml(tmp_path, '[approvals]\ndeadline = "1h"\n[approvals.groups.chat]\ndeadline = "5m"\n')
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
        assert call.deadline_at == T0 + 300


async def test_an_operators_decision_before_the_deadline_is_not_overridden(tmp_path):
    toml(tmp_path, '[approvals]\ndeadline = "1m"\n')
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
        from engine.domain.decisions import Decision

        await rt.decide(Decision.approve(call.call_id, seen=call.args))
        await rt.wait_turn(out.turn_id)
        await time.advance(120)
        assert [r[1] for r in await decided(rt, call.call_id)] == ["operator"]


async def test_an_overdue_call_is_decided_at_once_after_a_restart(tmp_path):
    time = FakeTime()
    async with offline(tmp_path, time) as rt:  # no deadline configured yet
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
        assert call.deadline_at is None
    toml(tmp_path, '[approvals]\ndeadline = "10m"\n')
    time.now += 3600  # the room was closed for an hour
    async with offline(tmp_path, time, first_id=100) as rt:
        # at once: the clock has not moved
        await until(lambda: decided(rt, call.call_id), APPLIED, ok=applied)
        done = await rt.wait_turn(out.turn_id)
        assert done.calls[0]["status"] == "cancelled"
        assert [r[1] for r in await decided(rt, call.call_id)] == ["deadline"]


async def test_a_call_under_crash_review_gets_no_deadline(tmp_path):
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        await rt.run_turn(msg("run `echo hi`"))
        [call] = await rt.pending()
    room_write(tmp_path / "room", "UPDATE tool_calls SET suspend_reason=?, awaiting='review' WHERE id=?",
               REVIEW_REASON, call.call_id)  # fmt: skip
    toml(tmp_path, '[approvals]\ndeadline = "10m"\n')
    time.now += 3600
    async with offline(tmp_path, time, first_id=100) as rt:
        await anyio.wait_all_tasks_blocked()
        await time.advance(3600)
        [still] = await rt.pending()
        assert (still.call_id, still.deadline_at) == (call.call_id, None)
    assert room_rows(tmp_path / "room", "SELECT * FROM decisions") == []


async def test_a_call_that_starts_waiting_carries_its_deadline_in_its_event(tmp_path):
    toml(tmp_path, '[approvals]\ndeadline = "2h"\n')
    time = FakeTime()
    async with offline(tmp_path, time) as rt:
        seen = []
        rt.subscribe(lambda e: seen.append(e) if e.kind == "call_changed" else None)
        await rt.run_turn(msg("run `echo hi`"))
        [event] = [e for e in seen if e.status == "suspended"]
        assert (event.deadline_at, event.on_deadline) == (T0 + 7200, "cancel")
