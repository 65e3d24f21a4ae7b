"""Outbound delivery: the answers a room owes its channels, sent from the outbox.

A turn from a delivering channel that ends with an answer leaves an outbox row in its
final checkpoint (`outbox.answer_owed`, engine/turn/loop.py). The worker here sends the rows
after the bus holds their turns' ends (truth, bus, delivery: in that order):

- at least once: a row is marked sent only after the channel took it, so a kill between
  the two sends it again on start (the channel gets the row's key, the turn's id, to drop
  that one duplicate);
- in order per thread: only the oldest open (pending or retrying) answer of a thread is
  due, and a thread has at most one answer in flight; dead and dropped ones stop holding
  the thread back;
- retried with exponential backoff and full jitter (`backoff`), or after the channel's
  `retry_after` when it gives one; dead after the channel's `max_tries`, or at once when
  the channel says the failure is permanent (an exception with `permanent = True`);
- every state change is one write with its `delivery_changed` event, so the bus and the
  console see it; the operator may `retry` a dead answer or `drop` a dead or retrying one.

A try is bounded by `[delivery] timeout`; the worker reads at most `concurrency` rows at a
time (one per thread in flight), so its memory does not grow with the outbox.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from engine.config import DeliveryConfig
from engine.domain.events import DeliveryChanged, Event, one_line
from engine.store import Op, Store, StoreError, outbox

# deliver(channel, reply, text, key): send one answer; raise to fail (see `failure_of`)
Deliver = Callable[[str, dict[str, Any], str, str], Awaitable[None]]
IDLE_MAX = 60.0  # seconds the worker sleeps at most when nothing is due (a poke wakes it)
RETRY_AFTER_MAX = 3600.0  # a channel's retry_after is honoured up to this
ERROR_CHARS = 300  # of a failure's text kept in the outbox and its event


class Commit(Protocol):
    """The event bus's commit (engine/services/event_bus.py): ops and events in one transaction."""

    def __call__(self, ops: list[Op], events: list[Event], *, checkpoint: str | None,
                 turn_id: str, urgent: bool = False) -> Awaitable[None]: ...  # fmt: skip


class CatchUp(Protocol):
    """What must be written before an answer leaves: the projector (engine/services/projector.py)."""

    async def catch_up(self) -> int: ...


@dataclass(frozen=True)
class Failure:
    """How a try failed: `permanent` (never worth another try), `retry_after` (seconds the
    channel asked for), and what happened, on one line."""

    permanent: bool
    retry_after: float | None
    error: str


def failure_of(exc: BaseException) -> Failure:
    """Any exception whose `permanent` is True is permanent (a channel's 4xx); `retry_after`
    is read when it has one; anything else is transient."""
    retry_after = getattr(exc, "retry_after", None)
    if not isinstance(retry_after, int | float) or isinstance(retry_after, bool):
        retry_after = None
    elif not 0 <= retry_after <= RETRY_AFTER_MAX:
        retry_after = min(max(float(retry_after), 0.0), RETRY_AFTER_MAX)
    text = one_line(str(exc)) or type(exc).__name__
    return Failure(getattr(exc, "permanent", False) is True, retry_after, text[:ERROR_CHARS])


def backoff(tries: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds before the next try after `tries` failed ones: full jitter, uniform in
    [0, min(cap, base * 2 ** (tries - 1))]."""
    return rng.uniform(0.0, min(cap, base * 2.0 ** min(max(tries - 1, 0), 60)))


@dataclass(frozen=True)
class Delivery:
    """One answer in the outbox, as the console lists it."""

    id: int
    turn_id: str
    thread_id: str
    channel: str
    state: str
    tries: int
    next_at: float
    last_error: str | None
    created_at: float
    sent_at: float | None
    text: str  # the answer's first 200 characters

    @classmethod
    def of(cls, row: Any) -> Delivery:
        return cls(row["id"], row["turn_id"], row["thread_id"], row["channel"], row["state"],
                   row["tries"], row["next_at"], row["last_error"], row["created_at"],
                   row["sent_at"], row["text"][:200])  # fmt: skip


async def counts(store: Store) -> dict[str, int]:
    """Answers by state: pending, retrying, sent, dead, dropped."""
    return await outbox.counts(store)


async def deliveries(store: Store, states: Sequence[str] = (), limit: int = 100,
                     before: int | None = None) -> list[Delivery]:  # fmt: skip
    """Answers newest first, a page of `limit` (`before`: the last id of the page before)."""
    return [Delivery.of(r) for r in await outbox.listing(store, states, limit, before)]


class DeliveryWorker:
    """Sends a room's owed answers; `run` in the runtime's task group."""

    def __init__(self, store: Store, commit: Commit, deliver: Deliver, *,
                 clock: Callable[[], float],
                 sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
                 projector: CatchUp | None = None,
                 config: DeliveryConfig | None = None,
                 rng: random.Random | None = None,
                 mask: Callable[[str], str] = str) -> None:  # fmt: skip
        self.store, self.commit, self.deliver = store, commit, deliver
        self.mask = mask  # the room's secrets out of what leaves and what is logged
        self.clock, self.sleep, self.projector = clock, sleep, projector
        self.config = config or DeliveryConfig()
        self.rng = rng or random.Random()
        self.log = logging.getLogger("agentdeck")
        self._busy: set[str] = set()  # threads with an answer in flight
        self._wake = anyio.Event()

    def poke(self) -> None:
        """Look for due answers now (sync, quick)."""
        self._wake.set()

    def watch(self, event: Event) -> None:
        """An event bus subscriber: a new owed answer wakes the worker."""
        if isinstance(event, DeliveryChanged) and event.state == "pending":
            self.poke()

    async def run(self) -> None:
        """Deliver until cancelled: first everything a previous run left owed, then each
        answer as it is owed or its retry falls due."""
        async with anyio.create_task_group() as tg:
            while True:
                self._wake = anyio.Event()  # a poke during the pass is kept for the next
                delay = await self._pass(tg)
                if delay > 0:
                    await self._idle(delay)

    async def _pass(self, tg: Any) -> float:
        """Start what is due; return the seconds until the next answer is."""
        room = self.config.concurrency - len(self._busy)
        if room <= 0:
            return IDLE_MAX  # a try that ends pokes
        try:
            due = await outbox.due(self.store, self.clock(), room, sorted(self._busy))
            if due and self.projector is not None:
                await self._project()
            for row in due:
                self._busy.add(row["thread_id"])
                tg.start_soon(self._send, row)
            if len(due) == room:
                return 0.0
            after = await outbox.next_at(self.store, sorted(self._busy))
        except StoreError as exc:
            self.log.warning("delivery: cannot read the outbox: %s", exc)
            return self.config.backoff
        if after is None:
            return IDLE_MAX
        return min(IDLE_MAX, max(0.0, after - self.clock()))

    async def _project(self) -> None:
        """The bus first: these answers' turns end on it before the answers leave. A bus
        that cannot be written (locked, disk full) does not hold answers back: the
        projector copies it all from the truth later, and users wait for no console."""
        assert self.projector is not None
        try:
            await self.projector.catch_up()
        except StoreError as exc:
            self.log.warning("delivery: the bus is behind (%s); delivering all the same", exc)

    async def _idle(self, delay: float) -> None:
        """Wait `delay` seconds (the injected sleep) or until poked."""
        async with anyio.create_task_group() as tg:

            async def timer() -> None:
                await self.sleep(delay)
                tg.cancel_scope.cancel()

            tg.start_soon(timer)
            await self._wake.wait()
            tg.cancel_scope.cancel()

    async def _send(self, row: Any) -> None:
        channel, timeout = row["channel"], self.config.timeout
        try:
            failure = None
            if row["tries"] >= self.config.tries_for(channel):  # every try died with its process
                failure = Failure(False, None, f"{row['tries']} tries ended with the runtime")
                with anyio.CancelScope(shield=True):
                    await self._mark(row, failure, counted=True)
                return
            try:
                await self.commit([outbox.attempted(row["id"], row["tries"] + 1)], [],
                                  checkpoint=None, turn_id=row["turn_id"])  # fmt: skip
            except StoreError as exc:  # not counted, so not sent: the next pass tries again
                self.log.error("delivery %s: cannot count its try: %s", row["id"], exc)
                return
            try:
                reply = json.loads(row["reply"])
                with anyio.fail_after(timeout):
                    await self.deliver(channel, reply if isinstance(reply, dict) else {},
                                       self.mask(row["text"]), row["key"])  # fmt: skip
            except TimeoutError:
                failure = Failure(False, None, f"no answer from {channel} in {timeout:g}s")
            except Exception as exc:  # a channel's failure, whatever its type
                failure = failure_of(exc)
                failure = replace(failure, error=self.mask(failure.error))  # a token in a URL
            with anyio.CancelScope(shield=True):  # what happened is written, even at a stop
                await self._mark(row, failure)
        finally:
            self._busy.discard(row["thread_id"])
            self.poke()

    async def _mark(self, row: Any, failure: Failure | None, counted: bool = False) -> None:
        """Record how a try ended (`counted`: no try was made, its count stands)."""
        now, channel = self.clock(), row["channel"]
        tries = row["tries"] if counted else row["tries"] + 1
        next_at: float | None = None
        if failure is None:
            state, op = "sent", outbox.sent(row["id"], tries, now)
        else:
            limit = self.config.tries_for(channel)
            if failure.permanent or tries >= limit:
                state, next_at = "dead", now
                why = "refused for good" if failure.permanent else f"{tries} tries failed"
                self.log.error("delivery %s to %s is dead (%s): %s", row["id"], channel, why,
                               failure.error)  # fmt: skip
            else:
                state = "retrying"
                wait = failure.retry_after
                if wait is None:
                    wait = backoff(tries, self.config.backoff, self.config.backoff_cap, self.rng)
                next_at = now + wait
                self.log.warning("delivery %s to %s failed (try %d of %d, again in %.1fs): %s",
                                 row["id"], channel, tries, limit, wait, failure.error)  # fmt: skip
            op = outbox.failed(row["id"], state, tries, next_at, failure.error)
        event = DeliveryChanged(
            at=now, thread_id=row["thread_id"], turn_id=row["turn_id"], channel=channel,
            key=row["key"], state=state, outbox_id=row["id"], tries=tries,  # type: ignore[arg-type]
            next_at=next_at if state == "retrying" else None,
            error=failure.error if failure else None,
        )  # fmt: skip
        try:
            await self.commit([op], [event], checkpoint=None, turn_id=row["turn_id"])
        except StoreError as exc:  # still open: tried again (sent again, if it was sent)
            self.log.error("delivery %s: cannot record %s: %s", row["id"], state, exc)

    # -- the operator's ---------------------------------------------------------------------

    async def retry(self, outbox_id: int) -> bool:
        """Send a dead answer again (its tries counted afresh); False if it is not dead."""
        return await self._operate(outbox_id, ("dead",), "pending", outbox.retried)

    async def drop(self, outbox_id: int) -> bool:
        """Give up on a dead or retrying answer; False if it is neither."""
        return await self._operate(outbox_id, ("dead", "retrying"), "dropped",
                                   lambda i, _at: outbox.dropped(i))  # fmt: skip

    async def _operate(self, outbox_id: int, states: tuple[str, ...], state: str,
                       op: Callable[[int, float], Op]) -> bool:  # fmt: skip
        row = await outbox.row(self.store, outbox_id)
        if row is None or row["state"] not in states:
            return False
        now = self.clock()
        event = DeliveryChanged(
            at=now, thread_id=row["thread_id"], turn_id=row["turn_id"], channel=row["channel"],
            key=row["key"], state=state, outbox_id=outbox_id,  # type: ignore[arg-type]
            tries=0 if state == "pending" else row["tries"], error=row["last_error"],
        )  # fmt: skip
        await self.commit([op(outbox_id, now)], [event], checkpoint=None, turn_id=row["turn_id"])
        self.poke()
        return True


async def run_delivery(store: Store, commit: Commit, deliver: Deliver, *,
                       clock: Callable[[], float], projector: CatchUp | None = None,
                       config: DeliveryConfig | None = None,
                       sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
                       mask: Callable[[str], str] = str,
                       task_status: TaskStatus[DeliveryWorker] = anyio.TASK_STATUS_IGNORED,
                       ) -> None:  # fmt: skip
    """Run a delivery worker until cancelled: `worker = await tg.start(run_delivery, ...)`
    hands back the worker (for `poke`, `watch`, `retry`, `drop`)."""
    worker = DeliveryWorker(store, commit, deliver, clock=clock, sleep=sleep,
                            projector=projector, config=config, mask=mask)  # fmt: skip
    task_status.started(worker)
    await worker.run()
