"""Rules in execution.db: made (by a remembered decision, or `agentdeck rules add`),
revoked (kept, marked), and the calls each decided, which are its uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.domain.rules import Rule
from engine.store.sqlite import Op, Store

if TYPE_CHECKING:
    from engine.store.reader import Reads


def made(rule: Rule) -> Op:
    """A new rule, with the id its RuleBook gave it."""
    return (
        "rules.made",
        (int(rule.id), rule.tool, rule.effect, rule.scope, rule.thread_id, rule.decision_id,
         rule.made_at or 0.0, rule.pattern, rule.made_by, rule.expires_at, rule.reason),
    )  # fmt: skip


def revoked(rule_id: str, by: str, at: float) -> Op:
    return (
        "rules.revoked",
        (at, by, int(rule_id)),
    )


def used(rule: Rule, call_id: str) -> Op:
    """`rule` decided the call `call_id` (at its `last_used`): written with the call."""
    return (
        "rules.used",
        (call_id, rule.key, rule.effect, rule.last_used or 0.0),
    )


async def load(store: Reads, toml: Iterable[Rule] = ()) -> list[Rule]:
    """agentdeck.toml's rules and execution.db's unrevoked ones, with their uses so far."""
    uses = {row["rule"]: (row["n"], row["last"]) for row in await store.fetchall("rules.uses")}
    stored = [
        Rule(
            id=str(r["id"]),
            tool=r["tool"],
            effect=r["effect"],
            pattern=r["pattern"],
            scope=r["scope"],
            thread_id=r["thread_id"] if r["scope"] != "room" else None,
            made_by=r["made_by"],
            made_at=r["created_at"],
            expires_at=r["expires_at"],
            reason=r["reason"],
            decision_id=r["decision_id"],
        )  # fmt: skip
        for r in await store.fetchall("rules.live")
    ]
    rules = []
    for rule in [*toml, *stored]:
        n, last = uses.get(rule.key, (0, None))
        rules.append(rule.model_copy(update={"uses": n, "last_used": last}))
    return rules


async def last_id(store: Reads) -> int:
    """The highest id a rule ever had (a revoked one's too): new ids go past it."""
    return int(await store.scalar("rules.last_id"))


async def revocation(store: Store, rule_id: str) -> tuple[float, str] | None:
    """When and by whom rule `rule_id` of execution.db was revoked; None when it never was
    (or no such rule was ever made)."""
    if not rule_id.isdigit():
        return None
    row = await store.fetchone(
        "rules.revocation",
        (int(rule_id),),
    )
    return None if row is None else (row["revoked_at"], row["revoked_by"] or "")
