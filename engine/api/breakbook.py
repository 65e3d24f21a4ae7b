"""Managing a runtime's breakpoints: list them with their hits, set one, remove one.

What `LocalClient.breakpoints`, `add_breakpoint` and `remove_breakpoint` do (and so the
API's routes, the console and the CLI through them). A breakpoint set here is checked (its
tool among the runtime's, its pattern as a rule's), stored in execution.db, then applied
from the next place a turn could pause; every runtime on the store reads it again, as it
reads the rules.
"""

from __future__ import annotations

from pydantic import ValidationError

from engine.api.break_models import NewBreakpoint, Removed
from engine.api.client import Invalid, NotFound
from engine.domain.breakpoints import Breakpoint, new_id
from engine.domain.rules import RuleError
from engine.runtime import Runtime
from engine.store import breakpoints as pointed


def listed(rt: Runtime) -> list[Breakpoint]:
    """Every breakpoint set (spent once ones too), with its hits, oldest first."""
    return rt.breakpoints.listed()


async def add(rt: Runtime, body: NewBreakpoint) -> Breakpoint:
    """Check, store and apply a new breakpoint; `Invalid` says what is wrong with it."""
    known = rt.tools.names()
    if body.tool is not None and body.tool not in known:
        raise Invalid(f"unknown tool {body.tool!r} (tools: {', '.join(sorted(known))})")
    if body.scope == "group" and body.group not in rt.scheduler.groups:
        groups = ", ".join(sorted(rt.scheduler.groups))
        raise Invalid(f"unknown group {body.group!r} (groups: {groups})")
    try:
        point = Breakpoint(id=new_id(), kind=body.kind, tool=body.tool, pattern=body.pattern,
                           scope=body.scope, thread_id=body.thread_id, group=body.group,
                           made_by=body.made_by, made_at=rt.clock(), reason=body.reason)  # fmt: skip
    except RuleError as exc:
        raise Invalid(str(exc)) from None
    except ValidationError as exc:
        raise Invalid("; ".join(str(e["msg"]).removeprefix("Value error, ")
                                for e in exc.errors())) from None  # fmt: skip
    await rt.store.write([pointed.made(point), *rt.ctx.coordinator.rules_changed()])
    rt.breakpoints.add(point)
    rt.log.info("%s set by %s", point.describe(), point.made_by)
    return point


async def remove(rt: Runtime, point_id: str, by: str) -> Removed:
    """Remove breakpoint `point_id`: `NotFound` for none set by that id."""
    point = rt.breakpoints.get(point_id)
    if point is None:
        raise NotFound(f"no breakpoint {point_id[:40]} (`agentdeck break list` lists them)")
    now = rt.clock()
    rt.breakpoints.remove(point_id)  # pauses nothing from now on, even before the write ends
    try:
        await rt.store.write([pointed.removed(point_id, by, now),
                              *rt.ctx.coordinator.rules_changed()])  # fmt: skip
    except BaseException:
        rt.breakpoints.add(point)
        raise
    rt.log.info("%s removed by %s", point.describe(), by)
    return Removed(breakpoint=point, removed_by=by, removed_at=now)
