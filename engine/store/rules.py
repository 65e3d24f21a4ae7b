"""Rules in execution.db: made (by a remembered decision, or `agentdeck rules add`),
revoked (kept, marked), and the calls each decided, which are its uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.rules import Rule
from engine.store.sqlite import Op, Store

if TYPE_CHECKING:
    from engine.store.reader import Reads


def made(rule: Rule) -> Op:
    """A new rule, with the id its RuleBook gave it."""
    return (
        "INSERT INTO rules(id, tool, effect, scope, thread_id, decision_id, created_at, pattern,"
        " made_by, expires_at, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (int(rule.id), rule.tool, rule.effect, rule.scope, rule.thread_id, rule.decision_id,
         rule.made_at or 0.0, rule.pattern, rule.made_by, rule.expires_at, rule.reason),
    )  # fmt: skip


def revoked(rule_id: str, by: str, at: float) -> Op:
    return (
        "UPDATE rules SET revoked_at=?, revoked_by=? WHERE id=? AND revoked_at IS NULL",
        (at, by, int(rule_id)),
    )


def used(rule: Rule, call_id: str) -> Op:
    """`rule` decided the call `call_id` (at its `last_used`): written with the call."""
    return (
        "INSERT OR REPLACE INTO rule_calls(call_id, rule, effect, at) VALUES (?,?,?,?)",
        (call_id, rule.key, rule.effect, rule.last_used or 0.0),
    )


async def load(store: Reads, toml: Iterable[Rule] = ()) -> list[Rule]:
    """agentdeck.toml's rules and execution.db's unrevoked ones, with their uses so far."""
    uses = {
        row["rule"]: (row["n"], row["last"])
        for row in await store.fetchall(
            "SELECT rule, count(*) AS n, max(at) AS last FROM rule_calls GROUP BY rule"
        )
    }
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
        for r in await store.fetchall("SELECT * FROM rules WHERE revoked_at IS NULL ORDER BY id")
    ]
    rules = []
    for rule in [*toml, *stored]:
        n, last = uses.get(rule.key, (0, None))
        rules.append(rule.model_copy(update={"uses": n, "last_used": last}))
    return rules


async def last_id(store: Reads) -> int:
    """The highest id a rule ever had (a revoked one's too): new ids go past it."""
    return int(await store.scalar("SELECT coalesce(max(id), 0) FROM rules"))


async def revocation(store: Store, rule_id: str) -> tuple[float, str] | None:
    """When and by whom rule `rule_id` of execution.db was revoked; None when it never was
    (or no such rule was ever made)."""
    if not rule_id.isdigit():
        return None
    row = await store.fetchone(
        "SELECT revoked_at, revoked_by FROM rules WHERE id=? AND revoked_at IS NOT NULL",
        (int(rule_id),),
    )
    return None if row is None else (row["revoked_at"], row["revoked_by"] or "")
