"""One rulebook for a cluster: a rule added, revoked or remembered through one worker is
the rule every worker applies at once (ids come from the database, changes are noticed
by every worker), evaluated from the same state everywhere (a once rule spent on one
worker is spent on all)."""

from __future__ import annotations

import pytest

from engine.api.local import LocalClient
from engine.api.rule_models import NewRule
from engine.domain.decisions import Decision
from tests.helpers import msg
from tests.scripted import first_then
from tests.test_cluster_runtime import waiting_call, workers
from tests.wait import until

pytestmark = pytest.mark.anyio


def shell_rule(effect: str, command: str, **kw: object) -> NewRule:
    return NewRule(effect=effect, tool="shell", pattern=command, **kw)  # type: ignore[arg-type]


async def listed(client: LocalClient) -> dict[str, str | None]:
    return {r.id: r.pattern for r in await client.rules()}


async def test_a_rule_added_through_one_worker_is_applied_by_every_worker(tmp_path, pg_url):
    async with workers(tmp_path, pg_url, 2) as (a, b):
        ca, cb = LocalClient(a), LocalClient(b)
        first = await ca.add_rule(shell_rule("allow", "echo one"))
        await until(lambda: listed(cb), "worker b lists the rule added through a",
                    ok=lambda rules: rules.get(first.id) == "echo one")  # fmt: skip
        second = await cb.add_rule(shell_rule("allow", "echo two"))  # no duplicate key
        assert second.id != first.id
        await until(lambda: listed(ca), "worker a lists the rule added through b",
                    ok=lambda rules: rules.get(second.id) == "echo two")  # fmt: skip
        assert b.rules.decide("shell", {"command": "echo one"}, "t", b.clock) is not None


async def test_a_rule_revoked_through_one_worker_decides_nothing_on_another(tmp_path, pg_url):
    async with workers(tmp_path, pg_url, 2) as (a, b):
        ca, cb = LocalClient(a), LocalClient(b)
        rule = await ca.add_rule(shell_rule("allow", "echo hi"))
        await until(lambda: listed(cb), "b has the rule", ok=lambda rules: rule.id in rules)
        await ca.revoke_rule(rule.id)
        await until(lambda: listed(cb), "b no longer has the rule",
                    ok=lambda rules: rule.id not in rules)  # fmt: skip
        assert b.rules.decide("shell", {"command": "echo hi"}, "t", b.clock) is None


async def test_a_remembered_decision_makes_a_rule_every_worker_lists(tmp_path, pg_url):
    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        handle, call_id, args = await waiting_call(a, b)
        decision = Decision.approve(call_id, args=args, remember="room")
        assert await b.decide(decision) == "queued"
        assert (await b.wait_turn(handle.turn_id)).status == "done"
        for rt in (a, b):
            await until(lambda rt=rt: listed(LocalClient(rt)), "each worker lists the rule",
                        ok=lambda rules: "echo hi" in rules.values())  # fmt: skip
        made = await LocalClient(b).add_rule(shell_rule("allow", "echo more"))
        ids = [r.id for r in await LocalClient(a).rules()]
        assert len(ids) == len(set(ids)) and made.id  # the remembered rule's id is not reused


async def test_a_once_rule_used_on_one_worker_is_spent_on_every_worker(tmp_path, pg_url):
    async with workers(tmp_path, pg_url, 2) as (a, b):
        rule = await LocalClient(a).add_rule(shell_rule("allow", "echo once", scope="once"))
        await until(lambda: listed(LocalClient(b)), "b has it", ok=lambda rules: rule.id in rules)
        script_thread = "y"
        script = first_then([("shell", {"command": "echo once"})])
        for rt in (a, b):
            rt.provider.script = script  # type: ignore[attr-defined]
        handle = await a.submit(msg("run it", thread=script_thread))
        assert (await a.wait_turn(handle.turn_id)).status == "done"  # the rule allowed it
        for rt in (a, b):
            await until(lambda rt=rt: LocalClient(rt).rules(), "spent on every worker",
                        ok=lambda rules: [r.uses for r in rules if r.id == rule.id] == [1])  # fmt: skip
            assert rt.rules.decide("shell", {"command": "echo once"}, "z", rt.clock) is None
