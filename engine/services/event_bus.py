"""The runtime's event bus: every change is published to subscribers after the truth.

A commit writes its ops, the checkpoint row and the events of that change in one
transaction, then hands the events to the subscribers (the console's bridge, the API's
hub, the run log): truth first, everything that shows it second. Events published
outside a commit (text deltas, step starts, a call's output: EPHEMERAL) go out at once;
the others wait to be stored with the next commit.

On a cluster, the events other workers stored reach the subscribers too (`relay`, from
engine/cluster/relay.py), so a console attached to any worker shows the whole runtime; a
subscriber that wants only this worker's own (its run log) says `relayed=False`.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.domain.events import CallOutput, Event, MessageAppended, StepStarted, TextDelta
from engine.store import Op, Store
from engine.store import turns as rows

Subscriber = Callable[[Event], None]
# Published and not stored: a table holds what they say (steps), or nothing needs to (text
# as it streams, a call's output as it runs: the message and the result are the record).
EPHEMERAL = (TextDelta, StepStarted, CallOutput)


class EventBus:
    """Subscribers, and the commit that stores events before they reach them."""

    def __init__(self, store: Store, run_id: str, clock: Callable[[], float]) -> None:
        self.store, self.run_id, self.clock = store, run_id, clock
        # (tuples, replaced when one comes or goes: an event is handed to those there when
        # it was published, without a copy of the list per event)
        self._subscribers: tuple[Subscriber, ...] = ()
        self._relayed: tuple[Subscriber, ...] = ()  # those also handed other workers' events
        self._unstored: list[Event] = []

    def subscribe(self, callback: Subscriber, *, relayed: bool = True) -> Callable[[], None]:
        """Call `callback` (sync, quick) with every event, and (`relayed`) with those other
        workers of a cluster stored; returns the unsubscribe function."""
        self._subscribers += (callback,)
        if relayed:
            self._relayed += (callback,)

        def unsubscribe() -> None:
            self._subscribers = _without(self._subscribers, callback)
            if relayed:
                self._relayed = _without(self._relayed, callback)

        return unsubscribe

    def publish(self, event: Event) -> None:
        """Hand an event to subscribers now; it is stored with the next commit unless a
        table already holds it or nothing needs to (EPHEMERAL)."""
        if not isinstance(event, EPHEMERAL):
            self._unstored.append(event)
        for callback in self._subscribers:
            callback(event)

    async def commit(
        self,
        ops: list[Op],
        events: list[Event],
        *,
        checkpoint: str | None,
        turn_id: str,
        urgent: bool = False,
    ) -> None:
        """One transaction: the ops, the checkpoint row, the events; then publish them.
        `urgent` (a turn's admission, a decision): first in the writer's next batch."""
        now = self.clock()
        if checkpoint:
            ops.append(rows.checkpoint(turn_id, self.run_id, checkpoint, now))
        stored, self._unstored = [*self._unstored, *events], []
        ops += rows.events_stored(  # one INSERT (the messages table is the record of those)
            [e for e in stored if not isinstance(e, MessageAppended)], self.run_id
        )
        # A turn's own rows; the events reach the subscribers right after the COMMIT, also
        # if the turn is cancelled while it waits (the write commits all the same).
        await self.store.write(ops, urgent=urgent, key=turn_id, then=lambda: self._hand(events))

    def relay(self, events: list[Event]) -> None:
        """Hand events another worker stored to the subscribers that take them (nothing is
        stored: the truth has them)."""
        for event in events:
            for callback in self._relayed:
                callback(event)

    def _hand(self, events: list[Event]) -> None:
        for event in events:
            for callback in self._subscribers:
                callback(event)


def _without(callbacks: tuple[Subscriber, ...], callback: Subscriber) -> tuple[Subscriber, ...]:
    """`callbacks` without the first `callback` (ValueError: not there, as list.remove)."""
    i = callbacks.index(callback)
    return callbacks[:i] + callbacks[i + 1 :]
