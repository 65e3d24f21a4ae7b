"""Managing a runtime's rules: list them with their uses, add one, revoke one.

What `LocalClient.rules`, `add_rule` and `revoke_rule` do (and so the API's routes and
every console and CLI through them). A rule added here is checked as agentdeck.toml's
are (its pattern by `check_pattern`, its tool among the runtime's), stored in
execution.db, then applied from the next call on. A revoked rule is kept in execution.db,
marked, and decides no call from then on. agentdeck.toml's rules are changed in the file,
never from here.
"""

from __future__ import annotations

from pydantic import ValidationError

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.rule_models import NewRule, Revoked
from engine.domain.rules import Rule, RuleError, check_pattern
from engine.runtime import Runtime
from engine.store import rules as ruled


def listed(rt: Runtime) -> list[Rule]:
    """Every rule the runtime applies (spent and expired ones too), with its uses and last
    use: agentdeck.toml's in the file's order, then execution.db's by id."""
    return rt.rules.listed()


async def add(rt: Runtime, body: NewRule) -> Rule:
    """Check, store and apply a new rule; `Invalid` says what is wrong with it."""
    known = rt.tools.names()
    if body.tool not in known:
        raise Invalid(f"unknown tool {body.tool!r} (tools: {', '.join(sorted(known))})")
    try:
        check_pattern(body.tool, body.pattern)
    except RuleError as exc:
        raise Invalid(str(exc)) from None
    now = rt.clock()
    if body.expires_at is not None and body.expires_at <= now:
        raise Invalid("the rule would expire before it is made: give a time in the future")
    thread = body.thread_id if body.scope != "room" else None
    if body.scope == "room" and body.thread_id is not None:
        raise Invalid("a room rule names no thread (a thread or once rule does)")
    try:
        rule = Rule(id="0", tool=body.tool, effect=body.effect, pattern=body.pattern,
                    scope=body.scope, thread_id=thread, made_by=body.made_by, made_at=now,
                    expires_at=body.expires_at, reason=body.reason)  # fmt: skip
    except ValidationError as exc:
        raise Invalid("; ".join(str(e["msg"]).removeprefix("Value error, ")
                                for e in exc.errors())) from None  # fmt: skip
    rule = rule.model_copy(update={"id": await rt.ctx.new_rule_id()})
    await rt.store.write([ruled.made(rule), *rt.ctx.coordinator.rules_changed()])  # durable first
    rt.rules.add(rule)
    rt.log.info("rule %s added by %s: %s", rule.id, rule.made_by, rule.describe())
    return rule


async def revoke(rt: Runtime, rule_id: str, by: str) -> Revoked:
    """Revoke rule `rule_id` of execution.db: `NotFound` for no such rule, `Conflict` for
    agentdeck.toml's or one revoked already."""
    rule = rt.rules.get(rule_id)
    if rule is None:
        if not (rule_id.isdigit() and int(rule_id) < 2**63):  # no stored rule has such an id
            raise NotFound(f"no rule {rule_id[:40]} (`agentdeck rules list` lists them)")
        if (done := await ruled.revocation(rt.store, rule_id)) is not None:
            _, who = done
            raise Conflict(f"rule {rule_id} is revoked already (by {who or 'someone'})")
        raise NotFound(f"no rule {rule_id} (`agentdeck rules list` lists them)")
    if rule.source == "toml":
        raise Conflict(
            f"rule {rule_id} is agentdeck.toml's ({rt.room.config}): change or remove it "
            "there, then restart the runtime"
        )
    now = rt.clock()
    rt.rules.remove(rule_id)  # decides nothing from now on, even before the write ends
    try:
        await rt.store.write([ruled.revoked(rule_id, by, now), *rt.ctx.coordinator.rules_changed()])
    except BaseException:
        rt.rules.add(rule)
        raise
    rt.log.info("rule %s revoked by %s: %s", rule_id, by, rule.describe())
    return Revoked(rule=rule, revoked_by=by, revoked_at=now)
