"""A runtime as one worker of a cluster: several runtimes on one PostgreSQL database.

The worker runs a thread's turns only while it leases the thread (engine/cluster/worker.py).
Everything it knows of a thread comes from the database when it takes the lease (`_take`):
the turns that hold it (a turn left `running` was a dead worker's: it is resumed, which is
crash recovery), its queued requests and the queued decisions for its calls. When the
thread has nothing left to run here (its turn done or waiting, no request queued) the
lease is given back and the thread forgotten, so any worker may take it next.

- Every checkpoint of a turn carries the fence (`fence`): a write made after the lease
  was lost fails alone (`LeaseLost`) and the turn stops, uncommitted.
- A request or a decision is written with a NOTIFY in its own transaction (`announce`):
  the worker holding the thread loads it at once, the others try to claim the thread.
- Group budgets hold across the cluster: a turn starts (or resumes) only after `try_admit`
  counts it among its group's running turns; the scheduler sees the other workers' running
  turns (`Scheduler.elsewhere`) so it does not pick one that would be refused.
- A heartbeat renews the leases every third of a lease; a lost thread's turn stops at once.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import psycopg
from anyio.abc import TaskStatus

from engine.cluster import anywhere, tasks
from engine.cluster.anywhere import cancel_here
from engine.cluster.listen import Listener
from engine.cluster.relay import relay_events
from engine.cluster.singleton import SingletonLock, run_as_singleton
from engine.cluster.worker import ClusterWorker
from engine.config import ClusterConfig
from engine.lifecycle import RequestStatus
from engine.services.coordinator import Host
from engine.store import Op, Store
from engine.store import claimed as reading
from engine.store import decisions as recorded
from engine.store import turns as rows
from engine.store.pg import claims as sql
from engine.store.pg.cluster import ClusterError, Conn, Lease, running_turns
from engine.store.pg.overview import read_view
from engine.store.pg.pool import Kept, Pool
from engine.store.pg.store import PgStore, scrub
from engine.store.schedule import stored_request

if TYPE_CHECKING:
    from engine.decisions.inbox import DecisionInbox
    from engine.domain.cluster_view import ClusterView
    from engine.domain.decisions import Decision
    from engine.domain.outcome import TurnOutcome
    from engine.services.coordinator import CancelHere, Here
    from engine.services.scheduler import Request, Scheduler
    from engine.turn.state import TurnState

log = logging.getLogger("agentdeck")
T = TypeVar("T")


class ClusterMember:
    """The cluster side of one runtime (its worker row, leases, notices, claims): the
    runtime's coordinator (engine/services/coordinator.py) when it is one worker of several."""

    keeps_conversations = False  # other workers append to a thread's between its turns

    def __init__(self, url: str, config: ClusterConfig) -> None:
        self.url, self.config = url, config
        self.rt: Host  # the runtime whose worker this is, from `start`
        self.name = config.worker or f"{socket.gethostname()[:40]}-{os.getpid()}"
        self.lease = config.lease_seconds
        self.worker: ClusterWorker | None = None
        self.pool: Pool | None = None  # the store's (pg/pool.py): all but the heartbeat's
        self.coordination: Kept | None = None  # admissions, settles, claims: one session
        self.listener: Listener | None = None
        self._claim_lock = anyio.Lock()
        self.wanted = anyio.Event()  # a notice came: claim now, not at the next tick
        self._releasing: set[str] = set()
        self._taking: set[str] = set()  # being leased and read: not held until taken up
        self._next_step = self._block_end = 0  # this worker's block of step ids
        self.beat_ok = 0.0

    # -- joining and leaving ----------------------------------------------------------------

    async def start(self, host: Host) -> None:
        """Join the cluster as `host`'s worker: the worker's row, a first block of step
        ids, the listener."""
        self.rt = host
        assert isinstance(host.store, PgStore)  # (lifetime makes a member only for one)
        self.pool = host.store.pool
        app = f"agentdeck-worker {self.name}"[:63]
        # membership and leases (the heartbeat) on a connection of the worker's own
        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                     application_name=app)  # fmt: skip
        self.worker = ClusterWorker(conn, self.name, lease_seconds=self.lease, url=self.url)
        await sql.ensure(conn)
        await self.worker.register()
        self.coordination = await self.pool.keep(f"agentdeck-coordination {self.name}")
        await self._new_block()
        self.listener = Listener(self.pool, app, on_thread=partial(tasks.noticed, self),
                                  on_cancel=partial(cancel_here, self.rt),
                                  on_rules=self.rt.reload_rules)  # fmt: skip
        await self.listener.start()
        self.beat_ok = anyio.current_time()

    async def stop(self) -> None:
        """Leave: every lease is given back now (no wait for its expiry)."""
        with anyio.CancelScope(shield=True):
            if self.worker is not None:
                await self.worker.leave()
            for part in (self.listener, self.coordination):  # their connections to the pool
                if part is not None:
                    await part.close()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The other workers' events relayed here (started: every later commit of theirs
        reaches the bus), then the heartbeat, the listener and the claims, until cancelled."""
        async with anyio.create_task_group() as tg:
            assert self.pool is not None
            await tg.start(relay_events, self.rt, self.pool, self.name)
            task_status.started()
            await tasks.run(self)

    def singleton(self, name: str, body: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `body` (the pulse, hook and poll loops; the approval deadlines) on one worker of
        the cluster at a time: the one holding the advisory lock `name`; it moves to
        another worker within a third of a lease when its holder's session ends."""
        assert self.pool is not None
        lock = SingletonLock(self.pool, name, application_name=f"agentdeck-{name} {self.name}")
        run = partial(run_as_singleton, lock, body, every=self.lease / 3, said=self.rt.notice,
                      who=f"worker {self.name}")  # fmt: skip
        self.rt.supervisor.spawn(run)

    def run_started(self, run_id: str, kind: str, pid: int, at: float) -> list[Op]:
        return rows.run_started(run_id, kind, pid, at, alone=False)  # others' runs go on

    async def restore(self, decisions: DecisionInbox) -> None:
        return None  # a thread's decisions are loaded with its lease

    def take_up(self, scheduler: Scheduler, interrupted: set[str],
                queued: list[Request]) -> tuple[set[str], list[Request]]:  # fmt: skip
        """Nothing: a worker takes a thread's state by lease (`claim`), not at start."""
        for thread_id in {*scheduler.holders, *(r.thread_id for r in queued)}:
            scheduler.forget(thread_id)
        return set(), []

    async def stale_turns(self, decisions: DecisionInbox) -> list[str]:
        return []  # (resumed by whoever leases their thread)

    # -- what turns and writes get ----------------------------------------------------------

    def announce(self, thread_id: str) -> list[Op]:
        return sql.announce(thread_id)

    def call_ended(self, call_id: str, note: str) -> list[Op]:
        return [recorded.left_queued(call_id, note)]  # queued through another worker too

    def rules_changed(self) -> list[Op]:
        return [sql.rules_changed()]

    async def left_decisions(self, store: Store) -> list[Decision]:
        return []  # a lease's take loads its thread's queued decisions

    async def wait_turn(self, turn_id: str, here: Here) -> TurnOutcome:
        return await anywhere.wait_turn(self.rt, turn_id)  # run by any worker

    async def cancel_turn(self, turn_id: str, reason: str, here: CancelHere) -> bool:
        if turn_id in self.rt.live:
            return await here(turn_id, reason)
        return await anywhere.cancel_turn(self, turn_id, reason)

    async def stored_request(self, turn_id: str) -> Request | None:
        return await stored_request(self.rt.store, turn_id)  # offered through another worker

    async def going_on(self, turn_id: str) -> bool:
        return await sql.going_on(self.rt.store, turn_id, self.rt.clock())

    def holds(self, thread_id: str) -> bool:
        return (self.worker is not None and self.worker.holds(thread_id)
                and thread_id not in self._releasing and thread_id not in self._taking)  # fmt: skip

    def fence(self, thread_id: str, turn_id: str) -> list[Op]:
        """The first statement of a checkpoint of a turn: fails the write unless this worker
        still holds the thread under the lease the turn was started under (a turn started
        under a lease that expired must not write under the next one, even this worker's:
        another worker may have held the thread between). A token of -1 never matches."""
        handle = self.rt.live.get(turn_id)
        if handle is not None and handle.token is not None:
            token = handle.token
        else:  # a turn ended here without running (a cancel): under the lease held now
            token = self.worker.held[thread_id].token if self.holds(thread_id) else -1  # type: ignore[union-attr]
        return [(sql.FENCE_SQL, (thread_id, token))]

    async def new_rule_id(self) -> str | None:  # one rulebook: ids from the database
        return str(await self.db(sql.rule_id))

    def next_step_id(self) -> int:
        """Step ids from this worker's block (taken after each new lease, so a turn that
        moves here gets ids above those its earlier worker gave it)."""
        self._next_step += 1
        if self._next_step >= self._block_end:  # a block is a million steps: not reached
            log.warning("worker %s ran out of its step block before the next claim", self.name)
        return self._next_step

    async def _new_block(self) -> None:
        assert self.worker is not None
        base = await self.db(sql.step_block)
        self._next_step, self._block_end = base, base + sql.STEP_BLOCK

    # -- claiming ---------------------------------------------------------------------------

    async def claim(
        self, threads: Iterable[str] | None = None, group: str | None = None
    ) -> list[str]:
        """Lease threads with work (None: the best the database offers, as many as this
        worker has room for; else these, if it has room, and `group` is not full) and take
        up their work. Returns the threads leased."""
        assert self.worker is not None
        async with self._claim_lock:
            rt, worker, sched = self.rt, self.worker, self.rt.scheduler
            if threads is None:
                everywhere = await self.db(running_turns)  # less this worker's own:
                sched.elsewhere = {
                    g: max(0, n - sched.running_here(g)) for g, n in everywhere.items()
                }
                rt.supervisor.pump()  # a slot elsewhere may have freed for what waits here
                free = sched.max_running_turns - sched.running
                full = [g for g in sched.groups if self._full(g)]
                priorities = {g.name: g.priority for g in sched.groups.values()}
                wanted = await self.db(lambda c: sql.claimable(
                    c, full=full, priorities=priorities, limit=max(free, 1)))  # fmt: skip
            elif sched.running < sched.max_running_turns and not (group and self._full(group)):
                wanted = [t for t in threads if not worker.holds(t)]
            else:  # no room (its notice reaches a worker that has some), or a full budget
                wanted = []
            if not wanted:
                return []
            # Until their work is read and taken up, the threads are not held: a notice for
            # one (its request's own) must not load that work first, and then again here.
            self._taking.update(wanted)
            try:
                leases = await self.leases(lambda _c: worker.acquire(wanted))
                if not leases:
                    return []
                await self._new_block()
                taken = [lease.thread_id for lease in leases]
                going = self._carry_on(leases)
                await self._take([t for t in taken if t not in going])
                for thread_id in going:
                    await self.refresh(thread_id)
            finally:
                self._taking.difference_update(wanted)
            return taken

    def _full(self, group: str) -> bool:
        g, sched = self.rt.scheduler.group(group), self.rt.scheduler
        return g.paused or sched.running_in(group) >= g.max_running_turns

    def _carry_on(self, leases: list[Lease]) -> set[str]:
        """Threads leased again from this worker's own expired lease (nobody held them
        between) whose turns run here: they go on under the new token, not stopped and
        resumed (which reran idempotent calls whenever a loaded machine let a lease lapse)."""
        going = set()
        for lease in leases:
            if lease.taken_from not in (None, self.name):
                log.info("worker %s took thread %s over from %s", self.name, lease.thread_id,
                         lease.taken_from)  # fmt: skip
            for handle in self.rt.live.values() if lease.taken_from == self.name else ():
                if handle.thread_id == lease.thread_id and handle.token and not handle.lost:
                    handle.token = lease.token
                    going.add(lease.thread_id)
        return going

    async def _take(self, threads: list[str]) -> None:
        """Take up the work of freshly leased threads, as the database has it."""
        rt, sv = self.rt, self.rt.supervisor
        self._taking.update(threads)  # (see claim)
        try:
            work = await reading.thread_work(rt.store, threads)
        finally:
            self._taking.difference_update(threads)
        for thread_id in threads:
            tasks.stop_turns(rt, thread_id)  # one still running under a lease that expired
            sv.forget(thread_id)  # what this worker knew of it is stale: read again
            for req in rt.scheduler.forget(thread_id):  # (a request whose turn is starting
                rt.live.pop(req.id, None)  # here under an older lease stays live: it fails)
            self._load(work[thread_id], fresh=True)
            if not self._busy(thread_id):
                self.rt.supervisor.spawn(self._release, thread_id)
        sv.pump()

    def _load(self, work: reading.ThreadWork, *, fresh: bool = False) -> None:
        """Add a thread's queued decisions and requests (those not known yet), hold it for
        its turns (`fresh`: a read under a new lease; else what this worker holds of them is
        newer than the read), and resume those that can go on and do not run here (one
        read `running` that ended here since the read is found done, and left)."""
        rt, sv = self.rt, self.rt.supervisor
        for decision in work.decisions:
            rt.decisions.add_new(decision)
        for turn_id, status, group in work.turns:
            if fresh:
                rt.scheduler.hold(work.thread_id, turn_id, group, status)
            if turn_id in rt.live:
                continue
            if status == "running" or work.decisions:  # left by a dead worker, or decided
                if status == "running":
                    sv.interrupted.add(turn_id)
                sv.spawn_resume(turn_id, work.thread_id)
        for req in work.requests:
            if not self._news(req, fresh=fresh):
                continue
            rt.scheduler.requeue(req)
            rt.adopt(req)

    def _news(self, req: Request, *, fresh: bool = False) -> bool:
        """Whether a request read as queued is neither in line here nor starting or running
        here (a read may predate its turn's first commit: it must not start twice). Unless
        the read came with a new lease (`fresh`), one admitted here since is not news either
        (it may have run and ended since the read)."""
        if self.rt.scheduler.knows(req.id) or req.id in self.rt.live:
            return False
        mine = None if fresh else self.rt.request(req.id)
        return mine is None or mine.status is RequestStatus.QUEUED

    async def refresh(self, thread_id: str) -> None:
        """A notice for a thread this worker holds: load what was added to it."""
        work = await reading.thread_work(self.rt.store, [thread_id])
        if self.holds(thread_id):
            self._load(work[thread_id])
            self.rt.supervisor.pump()

    def _busy(self, thread_id: str) -> bool:
        """Whether the thread has something to run here (not a turn waiting for a decision)."""
        rt = self.rt
        holder = rt.scheduler.holder(thread_id)
        if holder is not None:
            return holder[1] == "running" or holder[0] in rt.live
        return rt.scheduler.queued_on(thread_id) > 0

    # -- admission and settling (called by the supervisor) ----------------------------------

    async def admit(self, turn_id: str, thread_id: str, group: str) -> bool:
        """Count the turn (new or resumed) among its group's running turns across the
        cluster; False: the budget is full elsewhere (or the lease is gone): it must not run."""
        assert self.worker is not None
        worker, limit = self.worker, self.rt.scheduler.group(group).max_running_turns
        lease = worker.held.get(thread_id)
        if lease is None or not self.holds(thread_id):
            return False
        try:
            admit = partial(worker.try_admit, group=group, limit=limit, turn_id=turn_id,
                            thread_id=thread_id)  # fmt: skip
            admitted = await self.db(admit, again=True)  # (idempotent per turn)
        except ClusterError:  # the lease is gone: another worker has the thread now
            return False
        if admitted and (handle := self.rt.live.get(turn_id)) is not None:
            handle.token = lease.token  # what its checkpoints are fenced with
        return admitted

    def refused(self, req: Request) -> None:
        """A request's admission was refused by the cluster's budget: the thread goes back
        (its request is still queued in the database) for whoever has room."""
        self.rt.live.pop(req.id, None)
        self.rt.scheduler.forget(req.thread_id)  # undo the admission
        if self.holds(req.thread_id):  # the budget refused it (not a lost lease): full
            self.full(req.group)
        self.rt.supervisor.spawn(self._release, req.thread_id)

    def full(self, group: str) -> None:
        """The budget refused a turn of `group` (a resumed one waits here for the next slot):
        the group counts full until the next claim reads the budget's slots again."""
        sched = self.rt.scheduler
        most = sched.group(group).max_running_turns - sched.running_here(group)
        sched.elsewhere[group] = max(sched.elsewhere.get(group, 0), most)

    def settled(self, turn: TurnState, *, lost: bool) -> None:
        """A turn stopped running here: free its budget slot; give the thread back if it
        has nothing more to run here (or forget it, lost)."""
        sv = self.rt.supervisor
        if sv.tg is None or sv.tg.cancel_scope.cancel_called or self.worker is None:
            return
        sv.spawn(self._settled, turn.id, turn.thread_id, lost)

    def unstarted(self, req: Request) -> None:
        """An admitted request's turn could not be recorded: the lease went first. As a turn
        lost (its slot freed, the thread forgotten); the request is still queued."""
        sv = self.rt.supervisor
        self.rt.drop_request(req.id)  # not admitted after all: news to the next read
        if sv.tg is not None and not sv.tg.cancel_scope.cancel_called and self.worker is not None:
            sv.spawn(self._settled, req.id, req.thread_id, True)

    async def _settled(self, turn_id: str, thread_id: str, lost: bool) -> None:
        assert self.worker is not None
        worker = self.worker
        await self.quietly(self.db(lambda c: worker.finished(c, turn_id)))
        await self.quietly(self.db(lambda c: sql.notify_work(c, "")))  # a slot freed
        if lost:  # what does this worker hold now? (the database says: a heartbeat)
            await self.quietly(tasks.beat(self))
        if lost and self.holds(thread_id):  # leased again since (and taken up by the claim
            await self.quietly(self.refresh(thread_id))  # that leased it): resume the turn
        elif lost:
            tasks.forget(self.rt, thread_id)
        elif not self._busy(thread_id):
            await self._release(thread_id)

    async def _release(self, thread_id: str) -> None:
        """Give the thread's lease back, unless work for it came in meanwhile."""
        assert self.worker is not None
        worker = self.worker
        if thread_id in self._releasing or not worker.holds(thread_id) or self._busy(thread_id):
            return  # busy: a request or a turn of it came since the release was asked for
        self._releasing.add(thread_id)
        try:
            queued = await reading.queued_requests(self.rt.store, thread_id)
            if any(self._news(r) for r in queued):
                self._releasing.discard(thread_id)
                await self.refresh(thread_id)
                return
            if not tasks.forget(self.rt, thread_id):
                return  # a turn of it started meanwhile: the lease stays
            await self.quietly(self.leases(lambda _c: worker.release([thread_id])))
        finally:
            self._releasing.discard(thread_id)
        if queued:  # someone else may run them (a full budget kept them here)
            await self.quietly(self.db(lambda c: sql.notify_work(c, thread_id)))

    async def view(self) -> ClusterView:
        """The workers, their leases and every thread with its worker (for the operator)."""
        return await self.db(lambda c: read_view(c, self.name, self.lease))

    async def db(self, use: Callable[[Conn], Awaitable[T]], again: bool = False) -> T:
        """`use` the worker's coordination connection (kept from the pool: see Kept)."""
        assert self.coordination is not None
        return await self.coordination.use(use, again=again)

    async def leases(self, use: Callable[[Conn], Awaitable[T]]) -> T:
        """Change leases (acquire, release, heartbeat) on the worker's connection, in order."""
        assert self.worker is not None
        return await self.worker.use(use)

    async def quietly(self, step: Any) -> None:
        try:
            await step
        except (psycopg.Error, ClusterError) as exc:
            log.warning("worker %s: %s", self.name, scrub(str(exc), self.url))
