"""Scenario tests of the turn loop: suspension, decisions, replay, cancellation, gates."""

from __future__ import annotations

import json

import anyio
import pytest

from engine.config import Config
from engine.domain.decisions import Decision
from engine.domain.events import StepFinished
from engine.providers.base import ModelRequest, ProviderError
from engine.tools import ToolResult, tool
from engine.turn.plugins import (
    ConsecutiveErrors,
    Gate,
    MaxRounds,
    Phase,
    PhaseContext,
    Plugin,
    Timeout,
    default_stop_policies,
)
from tests.helpers import msg, on, rows, runtime
from tests.scripted import Reply, add, echo_results, first_then
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


async def test_plain_turn_runs_tools_and_answers(tmp_path):
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 3})])) as rt:
        out = await rt.run_turn(msg("add"))
        assert (out.status, out.reason) == ("done", "natural")
        assert out.text == "add: 5"
        assert [c["status"] for c in out.calls] == ["succeeded"]
        kinds = [r[0] for r in await rows(rt, "SELECT kind FROM checkpoints ORDER BY id")]
        assert kinds == [
            "user_message",
            "assistant_turn_committed",
            "tool_results_committed",
            "assistant_turn_committed",
            "run_finished",
        ]


async def test_one_suspended_one_succeeded_continues_with_placeholder(tmp_path):
    model_script = first_then([("add", {"a": 1, "b": 1}), ("shell", {"command": "ls"})])
    async with runtime(tmp_path, model_script) as rt:
        out = await rt.run_turn(msg("go"))
        # the model saw add's result and a pending placeholder for shell, answered,
        # and the turn waits because shell is still suspended: never done while suspended
        assert (out.status, out.reason) == ("waiting", "suspended")
        second = rt.provider.requests[1].messages
        tool_msgs = [m for m in second if m.role == "tool"]
        assert [(m.tool_name, m.pending) for m in tool_msgs] == [("add", False), ("shell", True)]
        [pending] = out.pending
        assert pending["tool"] == "shell"
        await rt.decide(Decision.approve(pending["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert "shell: ran ls" in out.text


async def test_all_suspended_waits_without_another_inference(tmp_path):
    script = first_then([("shell", {"command": "a"}), ("shell", {"command": "b"})])
    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        assert len(rt.provider.requests) == 1
        assert [c["status"] for c in out.calls] == ["suspended", "suspended"]
        first, second = (p["call_id"] for p in out.pending)
        await rt.decide(Decision.approve(first))
        out = await rt.wait_turn(out.turn_id)
        # one resolved, one still suspended: inference ran with a placeholder, then waits
        assert out.status == "waiting"
        assert [p["call_id"] for p in out.pending] == [second]
        await rt.decide(Decision.approve(second))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert "ran b" in out.text


async def test_decision_during_tool_round_is_applied_immediately(tmp_path):
    release = anyio.Event()
    order: list[str] = []

    @tool
    async def slow() -> str:
        """Wait until released."""
        await release.wait()
        order.append("slow finished")
        return "slow done"

    @tool(approval="always")
    def fast(x: int) -> int:
        """Needs approval."""
        order.append("fast ran")
        return x

    script = first_then([("slow", {}), ("fast", {"x": 7})])
    async with runtime(tmp_path, script, tools=[slow, fast]) as rt:
        handle = await rt.submit(msg("go"))
        [pending] = await until(rt.pending, "`fast` suspended for its approval")
        await rt.decide(Decision.approve(pending.call_id))
        await until(lambda: order, "`fast` ran", ok=lambda o: "fast ran" in o)
        assert order == ["fast ran"]  # replayed while `slow` still runs (stream mode)
        release.set()
        out = await rt.wait_turn(handle.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert len(rt.provider.requests) == 2  # no extra round for the replay
        assert "fast: 7" in out.text and "slow: slow done" in out.text


async def test_unmatched_decision_stays_queued_and_applies_later(tmp_path):
    script = first_then([("shell", {"command": "later"})])
    async with runtime(tmp_path, script) as rt:
        # ids are deterministic here: after the run r1 and the turn t2, the first call is c3
        status = await rt.decide(Decision.approve("c3", id="early"))
        assert status == "queued"
        assert await rows(rt, "SELECT status FROM decisions WHERE id='early'") == [("queued",)]
        out = await rt.run_turn(msg("go"))
        assert out.calls[0]["call_id"] == "c3"
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert await rows(rt, "SELECT status FROM decisions WHERE id='early'") == [("applied",)]


async def test_tool_returning_pending_takes_a_queued_decision_at_once(tmp_path):
    calls = []

    @tool
    def deploy(env: str) -> ToolResult:
        """Returns pending the first time: needs a second sign-off."""
        calls.append(env)
        return (
            ToolResult.pending("needs sign-off")
            if len(calls) == 1
            else ToolResult.success("deployed")
        )

    async with runtime(tmp_path, first_then([("deploy", {"env": "prod"})]), tools=[deploy]) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        [p] = out.pending
        await rt.decide(Decision.approve(p["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert out.status == "done" and "deployed" in out.text
        assert calls == ["prod", "prod"]


async def test_duplicate_decisions_change_nothing(tmp_path):
    async with runtime(tmp_path, first_then([("shell", {"command": "x"})])) as rt:
        out = await rt.run_turn(msg("go"))
        cid = out.pending[0]["call_id"]
        decision = Decision.approve(cid)
        assert await rt.decide(decision) == "queued"
        out = await rt.wait_turn(out.turn_id)
        assert await rt.decide(decision) == "duplicate"  # the same decision again
        assert await rt.decide(Decision.cancel(cid, "too late")) == "duplicate"
        after = await rt.outcome(out.turn_id)
        assert after == out
        assert await rows(rt, "SELECT status FROM decisions ORDER BY created_at") == [
            ("applied",),
            ("duplicate",),
        ]
        executions = await rows(rt, "SELECT count(*) FROM tool_calls WHERE status='succeeded'")
        assert executions == [(1,)]


async def test_denial_with_reason_is_seen_by_the_model(tmp_path):
    async with runtime(tmp_path, first_then([("shell", {"command": "rm -rf /"})])) as rt:
        out = await rt.run_turn(msg("go"))
        await rt.decide(Decision.cancel(out.pending[0]["call_id"], "not on prod"))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert out.calls[0]["status"] == "cancelled"
        assert "denied by operator: not on prod" in out.text
        tool_msg = [m for m in rt.provider.requests[-1].messages if m.role == "tool"][-1]
        assert tool_msg.is_error and "not on prod" in tool_msg.text


async def test_resume_with_edited_arguments_or_a_given_result(tmp_path):
    script = first_then([("shell", {"command": "a"}), ("shell", {"command": "b"})])
    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
        first, second = (p["call_id"] for p in out.pending)
        await rt.decide(Decision.approve(first, args={"command": "edited"}))
        await rt.decide(Decision.with_result(second, {"stdout": "canned"}))
        out = await until(lambda: rt.wait_turn(out.turn_id), "the turn done with both results",
                          ok=lambda o: o.status == "done")  # fmt: skip
        # the first decision may resume the turn before the second is recorded (the other
        # call a placeholder then): both results reach the model, not always in one request
        seen = {m.text for r in rt.provider.requests for m in r.messages
                if m.role == "tool" and not m.pending}  # fmt: skip
        assert {"ran edited", '{"stdout": "canned"}'} <= seen, seen
        args = await rows(rt, "SELECT args FROM tool_calls WHERE id=?", first)
        assert json.loads(args[0][0]) == {"command": "edited"}


async def test_replayed_call_may_suspend_again(tmp_path):
    class SecondOpinion(Plugin):
        """Suspends every approved shell call once more."""

        def __init__(self) -> None:
            self.asked = 0

        async def on_phase(self, ctx: PhaseContext) -> Gate | None:
            if ctx.phase is Phase.BEFORE_TOOL_EXECUTE and ctx.approved and self.asked == 0:
                self.asked += 1
                return Gate.suspend("second sign-off")
            return None

    plugin = SecondOpinion()
    async with runtime(tmp_path, first_then([("shell", {"command": "x"})]), plugins=[plugin]) as rt:
        out = await rt.run_turn(msg("go"))
        cid = out.pending[0]["call_id"]
        await rt.decide(Decision.approve(cid))
        out = await rt.wait_turn(out.turn_id)
        assert out.status == "waiting" and out.pending[0]["call_id"] == cid
        transitions = await rows(rt, "SELECT body FROM events WHERE kind='call_changed'")
        assert [json.loads(t[0])["status"] for t in transitions] == [
            "suspended", "resuming", "suspended"]  # fmt: skip
        await rt.decide(Decision.approve(cid))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")


async def test_cancelling_mid_tool_stops_the_tool_and_ends_cancelled(tmp_path):
    started, cleaned = anyio.Event(), []

    @tool
    async def hang() -> str:
        """Never returns on its own."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(True)

    async with runtime(tmp_path, first_then([("hang", {}), ("add", {"a": 1, "b": 2})]),
                       tools=[hang, add]) as rt:  # fmt: skip
        added = anyio.Event()
        rt.subscribe(lambda e: added.set() if getattr(e, "status", "") == "succeeded" else None)
        handle = await rt.submit(msg("go"))
        await started.wait()
        await added.wait()
        assert await rt.cancel_turn(handle.turn_id, "operator changed their mind")
        out = await rt.wait_turn(handle.turn_id)
        assert (out.status, out.reason) == ("done", "cancelled")
        assert cleaned == [True]
        statuses = dict(await rows(rt, "SELECT tool, status FROM tool_calls"))
        assert statuses == {"hang": "cancelled", "add": "succeeded"}
        # nothing half-written: every call of the turn has its answer in the conversation
        tool_msgs = await rows(rt, "SELECT count(*) FROM messages WHERE role='tool'")
        assert tool_msgs == [(2,)]
        # the tool round it cut short ends with it
        assert await rows(rt, "SELECT kind, status, summary FROM steps ORDER BY id") == [
            ("inference", "succeeded", "calls hang, add"),
            ("tool_round", "cancelled", "operator changed their mind"),
        ]
        assert await rt.store.integrity_check() == "ok"


async def test_cancelling_a_waiting_turn(tmp_path):
    async with runtime(tmp_path, first_then([("shell", {"command": "x"})])) as rt:
        out = await rt.run_turn(msg("go"))
        assert await rt.cancel_turn(out.turn_id)
        out = await rt.outcome(out.turn_id)
        assert (out.status, out.reason) == ("done", "cancelled")
        assert out.calls[0]["status"] == "cancelled"
        assert await rt.pending() == []


async def test_a_cancel_recorded_before_a_crash_ends_the_turn_when_it_is_recovered(tmp_path):
    """Issue 28: a cancel is a record. One recorded by a run that stopped before its turn
    ended (here: the record written, then the runtime gone with the turn mid-tool) ends
    the turn cancelled when the next run recovers it, instead of letting it go on (its
    call up for review)."""
    from engine.store import turns as stored

    started = anyio.Event()

    @tool
    async def hang() -> str:
        """Never returns on its own."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    script = first_then([("hang", {})])
    async with runtime(tmp_path, script, tools=[hang]) as rt:
        handle = await rt.submit(msg("go"))
        await started.wait()
        await rt.store.write([stored.cancel_asked(handle.turn_id, "stop it", rt.clock())])
    async with runtime(tmp_path, script, tools=[hang], first_id=100) as rt:
        out = await until(lambda: rt.outcome(handle.turn_id), "the recovered turn ended",
                          ok=lambda o: o.status == "done")  # fmt: skip
        assert (out.reason, out.detail) == ("cancelled", "stop it")
        assert out.calls[0]["status"] == "cancelled" and await rt.pending() == []


async def test_remembered_decisions_become_rules(tmp_path):
    async with runtime(tmp_path, first_then([("shell", {"command": "x"})])) as rt:
        out = await rt.run_turn(msg("go", thread="a"))
        await rt.decide(Decision.approve(out.pending[0]["call_id"], remember="thread"))
        await rt.wait_turn(out.turn_id)
        again = await rt.run_turn(msg("again", thread="a"))
        assert (again.status, again.reason) == ("done", "natural")  # allowed without asking
        other = await rt.run_turn(msg("other", thread="b"))
        assert other.status == "waiting"  # a thread rule does not reach other threads
        await rt.decide(Decision.cancel(other.pending[0]["call_id"], "no", remember="room"))
        await rt.wait_turn(other.turn_id)
        third = await rt.run_turn(msg("third", thread="c"))
        assert third.calls[0]["status"] == "failed"
        assert "denied by a remembered room rule" in third.text


async def test_tool_failures_are_results_the_model_sees(tmp_path):
    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("nope", {}), ("add", {"a": "x"}), ("boom", {}), ("add", "{bad")])
        return echo_results(request)

    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["failed"] * 4
        assert "unknown tool 'nope'" in out.text
        assert "invalid arguments for add: a" in out.text
        assert "RuntimeError: kaboom" in out.text
        assert "arguments must be a JSON object" in out.text


async def test_stop_policies(tmp_path):
    loop_forever = lambda request: Reply(calls=[("add", {"a": 1, "b": 1})])  # noqa: E731
    config = Config.model_validate({"runtime": {"max_rounds": 3}})
    async with runtime(tmp_path / "a", loop_forever, config=config) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason, out.detail) == (
            "done",
            "stopped:max_rounds",
            "reached 3 rounds",
        )

    always_fail = lambda request: Reply(calls=[("boom", {})])  # noqa: E731
    config = Config.model_validate({"runtime": {"max_consecutive_errors": 2}})
    async with runtime(tmp_path / "b", always_fail, config=config) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.reason == "stopped:consecutive_errors"

    now = [1000.0]

    def tick(request: ModelRequest) -> Reply:
        now[0] += 60
        return Reply(calls=[("add", {"a": 1, "b": 1})])

    config = Config.model_validate({"runtime": {"turn_timeout": 100}})
    async with runtime(tmp_path / "c", tick, config=config, clock=lambda: now[0]) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.reason == "stopped:timeout"


async def test_time_spent_waiting_for_a_decision_does_not_count_against_turn_timeout(tmp_path):
    """Found beside issue 13: a turn approved more than turn_timeout after it began ran its
    call, then stopped `stopped:timeout` before it could answer."""
    now = [1000.0]
    config = Config.model_validate({"runtime": {"turn_timeout": 100}})
    async with runtime(tmp_path, first_then([("shell", {"command": "echo hi"})]),
                       config=config, clock=lambda: now[0]) as rt:  # fmt: skip
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        now[0] += 3600  # the operator comes back an hour later
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")


async def test_provider_failure_ends_the_turn_with_error(tmp_path):
    def broken(request: ModelRequest) -> Reply:
        raise ConnectionError("model unreachable")

    async with runtime(tmp_path, broken) as rt:
        finished = []
        rt.subscribe(lambda e: finished.append(e) if isinstance(e, StepFinished) else None)
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "error")
        assert "model unreachable" in out.detail
        # the inference it failed in ends failed, saying why (not left `running`)
        [step] = await rows(rt, "SELECT kind, status, summary FROM steps")
        assert step[:2] == ("inference", "failed") and "model unreachable" in step[2]
        assert [(e.step_kind, e.status) for e in finished] == [("inference", "failed")]


async def test_a_provider_error_is_logged_as_its_message_not_a_traceback(tmp_path, caplog):
    def refused(request: ModelRequest) -> Reply:
        raise ProviderError("openai (m): no API key is set (set OPENAI_API_KEY)")

    async with runtime(tmp_path, refused) as rt:
        out = await rt.run_turn(msg("go"))
    assert out.reason == "error" and "no API key is set" in out.detail
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert "no API key is set" in record.getMessage() and record.exc_info is None


async def test_tool_concurrency_limit(tmp_path):
    running, peak = 0, 0

    @tool
    async def work(n: int) -> int:
        """Track how many run at once."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.02)  # held running, so the calls overlap up to the limit
        running -= 1
        return n

    config = Config.model_validate({"runtime": {"tool_concurrency": 2}})
    script = first_then([("work", {"n": i}) for i in range(5)])
    async with runtime(tmp_path, script, tools=[work], config=config) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "done"
        assert peak == 2


async def test_turns_of_one_thread_run_one_at_a_time(tmp_path):
    async with runtime(tmp_path, first_then([("shell", {"command": "x"})])) as rt:
        first = await rt.run_turn(msg("one"))
        assert first.status == "waiting"
        second = await rt.submit(msg("two"))
        assert rt.why_queued(second.turn_id)  # admitted as queued: it waits for the thread
        assert await rows(rt, "SELECT count(*) FROM turns") == [(1,)]  # queued behind
        await rt.decide(Decision.approve(first.pending[0]["call_id"]))
        await rt.wait_turn(first.turn_id)
        out = await rt.wait_turn(second.turn_id)
        assert out.status == "waiting"  # the second turn ran once the thread was free


async def test_refusal_ends_without_running_tools(tmp_path):
    script = lambda request: Reply(text="I can't help with that", refusal=True,  # noqa: E731
                                   calls=[("add", {"a": 1, "b": 1})])  # fmt: skip
    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.detail) == ("done", "refusal")
        assert out.text == "I can't help with that"
        assert out.calls == []  # a refusal runs nothing


async def test_waiting_turn_survives_a_restart(tmp_path):
    script = first_then([("shell", {"command": "x"})])
    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
    async with runtime(tmp_path, script, first_id=100) as rt:
        assert [p.call_id for p in await rt.pending()] == [out.pending[0]["call_id"]]
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")


async def test_a_result_given_by_a_decision_is_masked_and_cut_like_a_tools(tmp_path, monkeypatch):
    """Found beside issue 13: a decision's `result` skipped the result cap and the masking
    that a tool's result goes through."""
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    config = Config.model_validate({"runtime": {"max_result_bytes": 2048}})
    async with runtime(tmp_path, first_then([("shell", {"command": "cat notes"})]),
                       config=config) as rt:  # fmt: skip
        out = await rt.run_turn(msg("go"))
        given = f"the key is {secret}. " + "y" * 10_000
        await rt.decide(Decision.with_result(out.pending[0]["call_id"], given))
        await rt.wait_turn(out.turn_id)
        result = await on(rt.store).scalar("SELECT result FROM tool_calls WHERE tool='shell'")
    assert secret not in result and len(result.encode()) <= 2048


def test_default_stop_policies_are_the_rooms_limits():
    """The runtime built its stop policies inline while `default_stop_policies` (with other
    limits) went unused: one list, in one place, from `[runtime]`."""
    config = Config.model_validate(
        {"runtime": {"max_rounds": 3, "turn_timeout": 100, "max_consecutive_errors": 2}}
    )
    assert default_stop_policies(config.runtime) == [
        MaxRounds(3),
        Timeout(100.0),
        ConsecutiveErrors(2),
    ]
    assert default_stop_policies() == default_stop_policies(Config().runtime)


async def test_a_runtime_without_plugins_gets_the_default_stop_policies(tmp_path):
    config = Config.model_validate({"runtime": {"max_rounds": 3}})
    async with runtime(tmp_path, first_then([]), config=config) as rt:
        assert rt.plugins == default_stop_policies(config.runtime)
