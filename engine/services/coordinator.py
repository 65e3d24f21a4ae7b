"""Who runs what: the coordinator a runtime is built with, chosen once, at its start
(engine/runtime/lifetime.py): `OneRoom` (this runtime alone owns the room) or a cluster's
`ClusterMember` (one worker of several on one PostgreSQL database, engine/cluster/).

Everything that differs between the two goes through this protocol: the ids steps get,
the statements a checkpoint carries (a fence, a notice), whether a thread is this
runtime's to run, admission against group budgets, taking work up at start, waiting for,
cancelling and reading turns that run anywhere, and background work that runs on one
runtime only. The runtime, the supervisor and the API never ask which one they have.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskStatus

from engine.store import Op
from engine.store import decisions as recorded
from engine.store import turns as rows
from engine.turn.context import Coordinating

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from engine.config import Config
    from engine.decisions.inbox import DecisionInbox
    from engine.domain.cluster_view import ClusterView
    from engine.domain.decisions import Decision
    from engine.domain.outcome import TurnOutcome
    from engine.services.event_bus import EventBus
    from engine.services.handles import Carried, TurnHandle
    from engine.services.scheduler import Request, Scheduler
    from engine.store import Store
    from engine.turn.state import TurnState

Here = Callable[[str], Awaitable["TurnOutcome"]]  # wait for a turn run by this runtime
CancelHere = Callable[[str, str], Awaitable[bool]]  # cancel one (turn id, reason)


class Host(Protocol):
    """The runtime a coordinator serves, as the coordinators see it: they depend on this
    shape and not on engine.runtime (which is built with one, engine/runtime/lifetime.py: the
    dependency runs one way)."""

    store: Store
    config: Config
    bus: EventBus

    @property
    def supervisor(self) -> Turns: ...

    scheduler: Scheduler
    decisions: DecisionInbox
    live: dict[str, TurnHandle]
    run_id: str
    serves_queue: bool
    clock: Callable[[], float]

    def request(self, request_id: str) -> Request | None: ...

    def adopt(self, req: Request) -> None: ...

    def drop_request(self, request_id: str) -> None: ...

    def notice(self, level: str, text: str) -> None: ...

    async def outcome(self, turn_id: str) -> TurnOutcome: ...

    async def reload_rules(self) -> None: ...


class Turns(Protocol):
    """The runtime's turn supervisor, as the coordinators use it."""

    tg: TaskGroup | None
    interrupted: set[str]

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def pump(self, carried: Carried | None = None) -> bool: ...

    def forget(self, thread_id: str) -> None: ...

    def spawn_resume(self, turn_id: str, thread_id: str = "") -> TurnHandle: ...

    async def cancel_turn(self, turn_id: str, reason: str) -> bool: ...


class Coordinator(Coordinating, Protocol):
    """One room's runtime alone, or one worker of a cluster."""

    # A thread's conversation may be kept in memory from one turn to the next (a cluster's
    # worker reads it afresh: other workers append to it between).
    keeps_conversations: bool

    # -- the start, the background, the end ------------------------------------------------

    def run_started(self, run_id: str, kind: str, pid: int, at: float) -> list[Op]:
        """The rows that record this run's start."""
        ...

    async def restore(self, decisions: DecisionInbox) -> None:
        """Load what a previous run left queued for this runtime (its decisions)."""
        ...

    def take_up(self, scheduler: Scheduler, interrupted: set[str],
                queued: list[Request]) -> tuple[set[str], list[Request]]:  # fmt: skip
        """Of the turns left interrupted and the requests left queued (read into
        `scheduler`), those this runtime takes up at start."""
        ...

    async def start(self, host: Host) -> None:
        """Join: the runtime is built and its state read."""
        ...

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The background work (started with `tg.start`: told once the runtime may serve)."""
        ...

    async def stop(self) -> None: ...

    def singleton(self, name: str, body: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `body` (the loops, the approval deadlines) on one runtime of the room."""
        ...

    async def stale_turns(self, decisions: DecisionInbox) -> list[str]:
        """Waiting turns a previous run's decision is for: resume them to apply it."""
        ...

    # -- what steps and writes get ---------------------------------------------------------

    def next_step_id(self) -> int: ...

    def fence(self, thread_id: str, turn_id: str) -> list[Op]:
        """The first statements of a turn's checkpoint: fail it unless the turn's thread is
        still this runtime's."""
        ...

    def announce(self, thread_id: str) -> list[Op]:
        """What a write of a request or a decision for `thread_id` carries to wake whoever
        runs the thread (its own transaction, then)."""
        ...

    def call_ended(self, call_id: str, note: str) -> list[Op]:
        """A call ended: decisions queued for it elsewhere can never apply."""
        ...

    async def new_rule_id(self) -> str | None:
        """The id of the next rule made in the store (None: the rulebook's own count)."""
        ...

    def rules_changed(self) -> list[Op]:
        """What a write that changes the rules carries, so every runtime reads them again."""
        ...

    async def left_decisions(self, store: Store) -> list[Decision]:
        """Decisions a turn this run stopped (a full disk) may have taken: queued again."""
        ...

    # -- turns ------------------------------------------------------------------------------

    def holds(self, thread_id: str) -> bool:
        """Whether this runtime runs the thread's turns now."""
        ...

    async def claim(self, threads: Iterable[str] | None = None,
                    group: str | None = None) -> list[str]:  # fmt: skip
        """Take the threads (to run their work here) if this runtime may; those taken."""
        ...

    async def admit(self, turn_id: str, thread_id: str, group: str) -> bool:
        """Count a turn (new or resumed) among its group's running turns; False: it must
        not run (the group's budget is full elsewhere, or the thread is not ours)."""
        ...

    def refused(self, req: Request) -> None: ...

    def full(self, group: str) -> None: ...

    def settled(self, turn: TurnState, *, lost: bool) -> None: ...

    def unstarted(self, req: Request) -> None: ...

    async def wait_turn(self, turn_id: str, here: Here) -> TurnOutcome:
        """Until the turn (run here, with `here`, or anywhere) stops; where it stands."""
        ...

    async def cancel_turn(self, turn_id: str, reason: str, here: CancelHere) -> bool:
        """Cancel a turn run here (with `here`) or anywhere; False if it was done."""
        ...

    async def stored_request(self, turn_id: str) -> Request | None:
        """A request this runtime does not know, offered through another (None: none)."""
        ...

    async def going_on(self, turn_id: str) -> bool:
        """Whether a waiting turn is about to go on elsewhere (a decision woke it)."""
        ...

    async def view(self) -> ClusterView | None:
        """The workers and their threads, for the operator (None: one room alone)."""
        ...


class OneRoom:
    """This runtime alone owns the room: every thread is its own, and nothing is shared."""

    keeps_conversations = True

    def __init__(self) -> None:
        self._host: Host | None = None
        self._step_id = 0

    def run_started(self, run_id: str, kind: str, pid: int, at: float) -> list[Op]:
        return rows.run_started(run_id, kind, pid, at, alone=True)  # a dead run's: crashed

    async def restore(self, decisions: DecisionInbox) -> None:
        await decisions.restore()

    def take_up(self, scheduler: Scheduler, interrupted: set[str],
                queued: list[Request]) -> tuple[set[str], list[Request]]:  # fmt: skip
        return interrupted, queued

    async def start(self, host: Host) -> None:
        self._host = host
        self._step_id = await rows.last_step_id(host.store)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    async def stop(self) -> None:
        return None

    def singleton(self, name: str, body: Callable[[], Coroutine[Any, Any, object]]) -> None:
        assert self._host is not None, "the coordinator has not started"
        self._host.supervisor.spawn(body)

    async def stale_turns(self, decisions: DecisionInbox) -> list[str]:
        return await decisions.stale_turns()

    def next_step_id(self) -> int:
        self._step_id += 1
        return self._step_id

    def fence(self, thread_id: str, turn_id: str) -> list[Op]:
        return []

    def announce(self, thread_id: str) -> list[Op]:
        return []

    def call_ended(self, call_id: str, note: str) -> list[Op]:
        return []  # every decision for it is in this runtime's inbox

    async def new_rule_id(self) -> str | None:
        return None

    def rules_changed(self) -> list[Op]:
        return []

    async def left_decisions(self, store: Store) -> list[Decision]:
        return await recorded.queued(store)

    def holds(self, thread_id: str) -> bool:
        return True

    async def claim(self, threads: Iterable[str] | None = None,
                    group: str | None = None) -> list[str]:  # fmt: skip
        return list(threads or ())

    async def admit(self, turn_id: str, thread_id: str, group: str) -> bool:
        return True  # the scheduler admitted it: its budget is this runtime's alone

    def refused(self, req: Request) -> None:
        return None

    def full(self, group: str) -> None:
        return None

    def settled(self, turn: TurnState, *, lost: bool) -> None:
        return None

    def unstarted(self, req: Request) -> None:
        return None

    async def wait_turn(self, turn_id: str, here: Here) -> TurnOutcome:
        return await here(turn_id)

    async def cancel_turn(self, turn_id: str, reason: str, here: CancelHere) -> bool:
        return await here(turn_id, reason)

    async def stored_request(self, turn_id: str) -> Request | None:
        return None

    async def going_on(self, turn_id: str) -> bool:
        return False

    async def view(self) -> ClusterView | None:
        return None
