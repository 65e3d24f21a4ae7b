"""The decision inbox: queued decisions by call id, waiting for their call to suspend."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engine.domain.decisions import Decision
from engine.lifecycle import CallStatus
from engine.store import decisions as recorded

if TYPE_CHECKING:
    from engine.store import Op, Store
    from engine.turn.call import CallState


class DecisionInbox:
    """Decisions not yet applied, in arrival order per call.

    A decision restored at start was recorded by a run that ended before applying it: it
    is `stale`. A full runtime applies those at once (`stale_turns`); should the operator
    decide the call again first, the newest decision wins and the stale one is superseded
    (`supersede`). Among the decisions of one run, the first applies and the rest are
    duplicates; so are those still queued when their call ends (`ended`), and one still
    being written when another took its call or it ended (`recording`).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queued: dict[str, deque[Decision]] = defaultdict(deque)
        self._stale: set[str] = set()  # ids of decisions restored from an earlier run
        self._recording: Counter[str] = Counter()  # calls a decision is being written for
        self._settled: dict[str, str] = {}  # such a call -> how it was settled meanwhile

    async def load(self, decision_id: str | None) -> Decision:
        """A decision as stored (for replaying a call left `resuming`)."""
        decision = await recorded.load(self._store, decision_id)
        if decision is None:
            raise LookupError(f"decision {decision_id} is not in execution.db")
        return decision

    async def restore(self) -> None:
        """Reload the decisions a previous run queued and did not apply (stale ones)."""
        for decision in await recorded.queued(self._store):
            self.add(decision)
            self._stale.add(decision.id)

    async def stale_turns(self) -> list[str]:
        """The waiting turns a restored decision is for: resume them to apply it."""
        return await recorded.turns_with_queued(self._store)

    def supersede(self, decision: Decision, at: float) -> list[tuple[Decision, Op]]:
        """`decision` is newer than the stale decisions queued for its call: take those
        out, returning each with the row update that records it superseded."""
        queue = self._queued.get(decision.call_id)
        if not queue:
            return []
        gone = [d for d in queue if d.id in self._stale]
        for old in gone:
            queue.remove(old)
            self._stale.discard(old.id)
        note = f"superseded by {decision.id}"
        return [(old, recorded.superseded(old.id, note, at)) for old in gone]

    @contextmanager
    def recording(self, call_id: str) -> Iterator[None]:
        """While a decision on `call_id` is being written: another decision taking the
        call, or the call ending, is remembered (`settled_meanwhile`), since the one being
        written joins the queue only after its commit, too late to be made a duplicate."""
        self._recording[call_id] += 1
        try:
            yield
        finally:
            self._recording[call_id] -= 1
            if not self._recording[call_id]:
                del self._recording[call_id]
                self._settled.pop(call_id, None)

    def settled_meanwhile(self, call_id: str) -> str | None:
        """Why a decision being recorded for `call_id` can no longer apply ("call already
        ..."), or None."""
        return self._settled.get(call_id)

    def ended(self, call: CallState) -> list[Decision]:
        """`call` ended: the decisions still queued for it can never apply (duplicates)."""
        if call.id in self._recording:
            self._settled.setdefault(call.id, already(call))
        return self.drop_rest(call.id)

    def add(self, decision: Decision) -> None:
        self._queued[decision.call_id].append(decision)

    def add_new(self, decision: Decision) -> None:
        """Queue a decision read from the store, unless it is queued here already."""
        if all(d.id != decision.id for d in self._queued.get(decision.call_id, ())):
            self.add(decision)

    def queued_for(self, call_id: str) -> bool:
        return bool(self._queued.get(call_id))

    def take(
        self,
        suspended: list[CallState],
        refuse: Callable[[Decision, CallState], str | None] = lambda d, c: None,
    ) -> tuple[list[tuple[Decision, CallState]], list[tuple[Decision, CallState, str]]]:
        """The first queued decision of each suspended call that has one, and before it
        those `refuse` gives a reason not to apply (each with why): the call still waits."""
        taken, refused = [], []
        for call in suspended:
            queue = self._queued.get(call.id)
            while queue and call.status is CallStatus.SUSPENDED:
                decision = queue.popleft()
                self._stale.discard(decision.id)
                if (why := refuse(decision, call)) is not None:
                    refused.append((decision, call, why))
                    continue
                taken.append((decision, call))
                if call.id in self._recording:
                    self._settled[call.id] = f"call already decided by {decision.id}"
                break
        return taken, refused

    def drop_rest(self, call_id: str) -> list[Decision]:
        """Decisions that came after the applied one: they are duplicates now."""
        return list(self._queued.pop(call_id, ()))

    def __len__(self) -> int:
        return sum(len(q) for q in self._queued.values())


def already(call: CallState) -> str:
    """The note of a decision that came too late for `call`."""
    by = f" by {call.decision_id}" if call.decision_id else ""
    return f"call already {call.status.value}{by}"
