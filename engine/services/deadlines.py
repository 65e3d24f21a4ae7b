"""The timer that decides a suspended call when its deadline has passed (how long a call
may wait, and what its deadline decides, is engine/decisions/deadline.py).

At its deadline the configured default (`on_deadline`: cancel, or approve bound to the
call's arguments) is recorded as a decision by `deadline` through the normal decision
path, so it is durable and applied as any decision is. A call waiting for a review after
a crash (awaiting a `review`: engine.lifecycle.call) has no deadline: only a person says what
became of it.

The timer is one task in the runtime's task group. It reads what waits from execution.db,
decides what is overdue (after a restart, at once), and sleeps (the runtime's injectable
sleep, against its clock) until the next deadline or until a call starts waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from engine.config import ApprovalsConfig
from engine.decisions.deadline import deadline_for, deadline_of
from engine.domain.decisions import Decision, PendingCall
from engine.domain.events import CallChanged, Event
from engine.lifecycle import CallStatus
from engine.store import Store
from engine.store.outcome import read_pending

if TYPE_CHECKING:
    from engine.store.reader import Reads

RETRY = 5.0  # seconds before the timer reads again after a failed read or decision


async def pending_calls(store: Reads, approvals: ApprovalsConfig) -> list[PendingCall]:
    """Every suspended call in the room, oldest first, with its deadline."""
    calls = await read_pending(store)
    for i, call in enumerate(calls):
        if (deadline := deadline_of(approvals, call.tool, call.group, call.awaiting)) is not None:
            calls[i] = call.model_copy(update={"deadline_at": call.since + deadline.seconds,
                                               "on_deadline": deadline.on_deadline})  # fmt: skip
    return calls


def duration(seconds: float) -> str:
    """A duration as agentdeck.toml writes it: 90 -> "1m30s", 7200 -> "2h"."""
    whole, parts = round(seconds), list[str]()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size or (unit == "s" and not parts):
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts)


class DeadlineWatch:
    """The timer that decides overdue calls (`run` it in the runtime's task group)."""

    def __init__(
        self,
        store: Store,
        approvals: ApprovalsConfig,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[Any]],
        decide: Callable[[Decision], Awaitable[str]],
        queued: Callable[[str], bool],
        subscribe: Callable[[Callable[[Event], None]], Callable[[], None]],
        notice: Callable[[str, str], None],
    ) -> None:
        self.store, self.approvals = store, approvals
        self._clock, self._sleep, self._decide, self._queued = clock, sleep, decide, queued
        self._subscribe, self._notice = subscribe, notice
        self._decided: set[str] = set()  # calls this run decided at their deadline
        self._poked = anyio.Event()

    def poke(self) -> None:
        """Something may have a new deadline: read again."""
        self._poked.set()

    def _seen(self, event: Event) -> None:
        if isinstance(event, CallChanged) and event.status == CallStatus.SUSPENDED:
            self.poke()

    async def run(self) -> None:
        """Decide overdue calls, then sleep until the next deadline or a new waiting call;
        for as long as the runtime runs."""
        unsubscribe = self._subscribe(self._seen)
        try:
            while True:
                self._poked = anyio.Event()  # before the read: a call suspended during it
                try:  # pokes this one
                    due = await self.sweep()
                except Exception as exc:  # the store is the runtime's to fail: retry later
                    self._notice("warning", f"approval deadlines could not be applied: {exc}")
                    due = self._clock() + RETRY
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_then_cancel, self._poked.wait, tg.cancel_scope)
                    if due is not None:
                        nap = partial(self._sleep, max(0.0, due - self._clock()))
                        tg.start_soon(_then_cancel, nap, tg.cancel_scope)
        finally:
            unsubscribe()

    async def sweep(self) -> float | None:
        """Decide every call whose deadline has passed; return the next deadline (None:
        nothing waits with one)."""
        now, due = self._clock(), None
        calls = await pending_calls(self.store, self.approvals)
        self._decided &= {c.call_id for c in calls}  # those applied are gone
        for call in calls:
            at = call.deadline_at
            if at is None or call.call_id in self._decided or self._queued(call.call_id):
                continue  # no deadline, or decided already (the turn is busy)
            if at > now:
                due = at if due is None else min(due, at)
                continue
            await self._expire(call)
        return due

    async def _expire(self, call: PendingCall) -> None:
        deadline = deadline_for(self.approvals, call.tool, call.group)
        if deadline is None:  # (deadline_at said there is one)
            return
        word = "approved" if deadline.on_deadline == "approve" else "cancelled"
        waited = f"{duration(deadline.seconds)}, {deadline.source}"
        reason = f"the decision deadline passed ({waited}): {word} by default"
        if deadline.on_deadline == "approve":
            decision = Decision.approve(call.call_id, seen=call.args, decided_by="deadline",
                                        reason=reason)  # fmt: skip
        else:
            decision = Decision.cancel(call.call_id, reason, decided_by="deadline")
        self._decided.add(call.call_id)
        status = await self._decide(decision)
        self._notice(
            "warning" if status == "refused" else "info",
            f"{call.thread_id}: {call.tool} call {call.call_id} {word} at its deadline "
            f"({waited})" + ("" if status == "queued" else f"; the decision was {status}"),
        )


async def _then_cancel(wait: Callable[[], Awaitable[Any]], scope: anyio.CancelScope) -> None:
    await wait()
    scope.cancel()
