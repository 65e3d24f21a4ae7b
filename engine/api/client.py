"""The one interface the console and the CLI program against, and the errors it raises.

Two implementations: `LocalClient` over a `Runtime` in this process (the room's owner) and
`RemoteClient` over the owner's API (everyone else). Both return the engine's own types,
so a caller cannot tell them apart except by `hosted`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from engine.api.operations import Operation, declarer
from engine.room import Room

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from engine.api.break_models import NewBreakpoint, Removed
    from engine.api.fork_models import ForkBody, ReplayBody
    from engine.api.models import (
        Cancelled,
        ChannelsView,
        Decided,
        DeliveryRow,
        GroupChange,
        Info,
        RoomOverview,
        SubmitBody,
        Submitted,
        ThreadInstructions,
    )
    from engine.api.rule_models import NewRule, Revoked
    from engine.api.tool_models import ToolsView
    from engine.api.usage_models import BudgetsView, By, UsageReport
    from engine.api.watch import Watch
    from engine.domain.audit import AuditPage
    from engine.domain.breakpoints import Breakpoint
    from engine.domain.cluster_view import ClusterView
    from engine.domain.decisions import Decision, PendingCall
    from engine.domain.events import Event
    from engine.domain.forks import Forked
    from engine.domain.outcome import TurnOutcome
    from engine.domain.requests import GroupConfig
    from engine.domain.retention import GcReport
    from engine.domain.review import Killed, Review
    from engine.domain.rules import Rule
    from engine.domain.scheduler_stats import Statistics
    from engine.domain.turn_diff import TurnDiff
    from engine.store.recent import Conversation, Recent

# Where the types the operations name live: imported when an operation is first carried or
# served, so a command loads only the models of the operations it uses.
operation = declarer({
    "engine.api.models": ("CancelBody", "Cancelled", "ChannelsView", "Decided", "DeliveryRow",
                          "GroupChange", "Info", "InstructionsBody", "RoomOverview",
                          "SubmitBody", "Submitted", "ThreadInstructions"),
    "engine.api.rule_models": ("NewRule", "RevokeBody", "Revoked"),
    "engine.api.break_models": ("NewBreakpoint", "RemoveBody", "Removed"),
    "engine.domain.breakpoints": ("Breakpoint",),
    "engine.api.fork_models": ("ForkBody", "ReplayBody"),
    "engine.domain.forks": ("Forked",),
    "engine.api.usage_models": ("BudgetBody", "BudgetsView", "By", "UsageReport"),
    "engine.api.tool_models": ("ToolsView",),
    "engine.api.gc_models": ("GcBody",),
    "engine.domain.retention": ("GcReport",),
    "engine.domain.audit": ("AuditPage",),
    "engine.domain.cluster_view": ("ClusterView",),
    "engine.domain.decisions": ("Decision", "PendingCall"),
    "engine.domain.outcome": ("TurnOutcome",),
    "engine.domain.review": ("Killed", "Review"),
    "engine.domain.rules": ("Rule",),
    "engine.domain.requests": ("GroupConfig",),
    "engine.domain.scheduler_stats": ("Statistics",),
    "engine.domain.turn_diff": ("TurnDiff",),
})  # fmt: skip


class _Ignored:
    """anyio's TASK_STATUS_IGNORED, without importing anyio for a client that never follows."""

    def started(self, value: object = None) -> None:
        pass


IGNORED: Any = _Ignored()
GROUP_NAME = r"^[A-Za-z0-9_.:-]{1,64}$"
DAY = r"^\d{4}-\d{2}-\d{2}$"
DELIVERY_STATE = r"^(pending|retrying|sent|dead|dropped)$"
Receive = Callable[["Event"], None]
Resync = Callable[[], Awaitable[None]]


class ApiError(Exception):
    """The owner refused a request; `status` is the HTTP status, the text says why."""

    status = 500

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status


class NotFound(ApiError, LookupError):
    """No such turn, call or route."""

    status = 404


class Conflict(ApiError):
    """The request cannot apply now (a waiting thread, a full queue, a stopping runtime)."""

    status = 409


class Invalid(ApiError, ValueError):
    """The request is malformed: the text names what."""

    status = 422


class Refused(ApiError):
    """The scheduler refused the request (its group's queue is full); the text is the
    reason it recorded."""

    status = 429


class OwnerGone(ApiError):
    """Nobody serves the room any more (the owner stopped or died), or never did."""

    status = 503


class ServerError(RuntimeError):
    """The API cannot be served as configured; the text says why and what to change."""


class RoomClient:
    """What an operator can do to a room's runtime, wherever it runs: the table of
    operations (`@operation`, engine/api/operations.py), and the event stream.

    `LocalClient` implements each operation over the runtime in this process; `RemoteClient`
    carries them to the owner's API (`carry`). Every operation may also raise `OwnerGone`
    (nobody serves the room) and `Invalid` (a request that does not fit its types)."""

    room: Room

    @property
    def hosted(self) -> bool:
        """True in the owner's own process; False when attached to it from another."""
        raise NotImplementedError

    async def carry(self, op: Operation, arguments: dict[str, Any]) -> Any:
        """Carry out `op` elsewhere (the owner's API); a client that implements every
        operation itself never gets here."""
        raise NotImplementedError(f"{type(self).__name__} does not carry {op.name}")

    @operation("GET", "/v1/health", mutates=False)
    async def info(self) -> Info:
        """Who serves the room: pid, run, model, version, uptime (503 while stopping)."""
        raise NotImplementedError

    @operation("POST", "/v1/messages", mutates=True, status=202, errors=(409, 429))
    async def submit(self, body: SubmitBody) -> Submitted:
        """Offer a message for a turn; answered once its request is durable: admitted,
        queued (and why) or coalesced, with the turn that will answer it."""
        raise NotImplementedError

    @operation("GET", "/v1/turns/{turn_id}", mutates=False, errors=(404,),
               constraints={"wait": {"ge": 0, "le": 60}}, long_poll="wait")  # fmt: skip
    async def outcome(self, turn_id: str, wait: float = 0.0) -> TurnOutcome:
        """Where a turn (or a request still queued) stands; with `wait`, up to that many
        seconds (60 at most) for it to stop running first."""
        raise NotImplementedError

    @operation("POST", "/v1/decisions", mutates=True, errors=(404,))
    async def decide(self, decision: Decision) -> Decided:
        """Approve (maybe with edited arguments, or a result to use), or cancel, a call;
        answered once the decision is durable: queued, duplicate (and which decision won)
        or refused."""
        raise NotImplementedError

    @operation("POST", "/v1/turns/{turn_id}/cancel", mutates=True, errors=(404,),
               body="CancelBody")  # fmt: skip
    async def cancel(self, turn_id: str, reason: str = "cancelled by operator") -> Cancelled:
        """Cancel a running or waiting turn: it ends done/cancelled."""
        raise NotImplementedError

    @operation("GET", "/v1/pending", mutates=False)
    async def pending(self) -> list[PendingCall]:
        """Every call waiting for a decision, oldest first."""
        raise NotImplementedError

    @operation("GET", "/v1/reviews", mutates=False)
    async def reviews(self) -> list[Review]:
        """Every call waiting for a review after a crash, oldest first, with what is known
        of it now (its process group alive or not, the files it was writing)."""
        raise NotImplementedError

    @operation("POST", "/v1/reviews/{call_id}/kill", mutates=True, errors=(404, 409))
    async def kill_orphan(self, call_id: str) -> Killed:
        """End the process group a crash left of a call (SIGTERM, then SIGKILL): only one
        this room recorded, in a run before the current one; 409 otherwise."""
        raise NotImplementedError

    @operation("GET", "/v1/rules", mutates=False)
    async def rules(self) -> list[Rule]:
        """Every rule applied: agentdeck.toml's, then execution.db's, with uses and last use."""
        raise NotImplementedError

    @operation("POST", "/v1/rules", mutates=True, status=201)
    async def add_rule(self, rule: NewRule) -> Rule:
        """Store and apply a new rule (422 for a pattern, tool or scope that cannot be used)."""
        raise NotImplementedError

    @operation("POST", "/v1/rules/{rule_id}/revoke", mutates=True, errors=(404, 409),
               body="RevokeBody")  # fmt: skip
    async def revoke_rule(self, rule_id: str, by: str = "operator") -> Revoked:
        """Revoke a rule of execution.db (404 no such rule; 409 agentdeck.toml's, which is
        changed in the file, or one revoked already)."""
        raise NotImplementedError

    @operation("GET", "/v1/breakpoints", mutates=False)
    async def breakpoints(self) -> list[Breakpoint]:
        """Every breakpoint set (spent once ones too), with its hits, oldest first."""
        raise NotImplementedError

    @operation("POST", "/v1/breakpoints", mutates=True, status=201)
    async def add_breakpoint(self, point: NewBreakpoint) -> Breakpoint:
        """Set a breakpoint: turns pause there from the next place they could (422 for a
        tool, pattern, group or scope that cannot be used)."""
        raise NotImplementedError

    @operation("POST", "/v1/breakpoints/{point_id}/remove", mutates=True, errors=(404,),
               body="RemoveBody")  # fmt: skip
    async def remove_breakpoint(self, point_id: str, by: str = "operator") -> Removed:
        """Remove a breakpoint (404 none by that id); the pauses it made still wait."""
        raise NotImplementedError

    @operation("POST", "/v1/forks", mutates=True, status=201, errors=(404, 409))
    async def fork(self, fork: ForkBody) -> Forked:
        """Fork a turn's thread at one of its steps into a thread of its own, optionally with
        user messages or tool results edited; it goes on at once if the record waits for an
        answer (404 no such turn or step, 409 the thread named exists, 422 a bad edit)."""
        raise NotImplementedError

    @operation("POST", "/v1/replays", mutates=True, status=201, errors=(404,))
    async def replay(self, replay: ReplayBody) -> Forked:
        """Replay a recorded turn in a scratch thread on its recorded results (no tool runs;
        a call whose arguments differ waits for a decision), optionally against another
        model, strategy, instructions or group (404 no such turn)."""
        raise NotImplementedError

    @operation("GET", "/v1/channels", mutates=False)
    async def channels(self) -> ChannelsView:
        """Every loop (server, pulse, hook listener) and channel with its state (starting,
        up, failing, stopped), and the outbound deliveries by state."""
        raise NotImplementedError

    @operation("GET", "/v1/deliveries", mutates=False,
               constraints={"state": {"pattern": DELIVERY_STATE}, "limit": {"ge": 1, "le": 1000}})  # fmt: skip
    async def deliveries(self, state: str | None = None, limit: int = 100) -> list[DeliveryRow]:
        """The answers owed to channels, newest first; only those in `state` when given."""
        raise NotImplementedError

    @operation("POST", "/v1/deliveries/{outbox_id}/retry", mutates=True, errors=(404, 409))
    async def retry_delivery(self, outbox_id: int) -> DeliveryRow:
        """Send a dead answer again (404 no such delivery; 409 not dead, or the delivery
        worker is not running)."""
        raise NotImplementedError

    @operation("POST", "/v1/deliveries/{outbox_id}/drop", mutates=True, errors=(404, 409))
    async def drop_delivery(self, outbox_id: int) -> DeliveryRow:
        """Give up on a dead or retrying answer (404 no such delivery; 409 neither, or the
        delivery worker is not running)."""
        raise NotImplementedError

    @operation("GET", "/v1/rooms", mutates=False)
    async def rooms(self) -> list[RoomOverview]:
        """Every room on the machine's bus (this room's bus file), with its running and
        waiting turns and whether its owner is alive."""
        raise NotImplementedError

    @operation("GET", "/v1/scheduler", mutates=False)
    async def statistics(self) -> Statistics:
        """The scheduler: groups, busy threads, queued requests and why each waits. On a
        cluster's worker, every thread of the cluster, each with the worker leasing it."""
        raise NotImplementedError

    @operation("GET", "/v1/cluster", mutates=False)
    async def cluster(self) -> ClusterView | None:
        """The cluster's workers (heartbeat, state, leases, the first threads each leases)
        and every thread with the worker leasing it; null when the runtime is not a
        cluster's worker."""
        raise NotImplementedError

    @operation("PATCH", "/v1/groups/{name}", mutates=True, errors=(404,),
               constraints={"name": {"pattern": GROUP_NAME}})  # fmt: skip
    async def configure_group(self, name: str, change: GroupChange) -> GroupConfig:
        """Pause, resume or re-budget a thread group; it persists."""
        raise NotImplementedError

    @operation("GET", "/v1/instructions", mutates=False,
               constraints={"thread_id": {"min_length": 1, "max_length": 4096}})  # fmt: skip
    async def instructions(self, thread_id: str) -> ThreadInstructions:
        """What a new turn on the thread is told: the room's AGENTS.md, agentdeck.toml's
        [agent] and the group's, and the thread's own, in that order."""
        raise NotImplementedError

    @operation("PUT", "/v1/instructions", mutates=True, body="InstructionsBody")
    async def set_instructions(self, thread_id: str, text: str | None = None) -> ThreadInstructions:
        """Set the thread's own instructions (None or blank: none); its next turn is told."""
        raise NotImplementedError

    @operation("GET", "/v1/tools", mutates=False)
    async def tools(self) -> ToolsView:
        """Every tool the agent has: built in or from which MCP server, its approval and
        the rules that name it, its calls and errors this run; each MCP server's state;
        the shell's sandbox."""
        raise NotImplementedError

    @operation("GET", "/v1/usage", mutates=False,
               constraints={"since": {"pattern": DAY}, "until": {"pattern": DAY},
                            "limit": {"ge": 1, "le": 10_000}})  # fmt: skip
    async def usage(
        self,
        by: By | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> UsageReport:
        """Tokens (in, out, cached) and cost from `since` to `until` (UTC days, both
        included; default today), in total and per day, group, thread or model (`by`)."""
        raise NotImplementedError

    @operation("GET", "/v1/budgets", mutates=False)
    async def budgets(self) -> BudgetsView:
        """The budgets that apply (per turn; per thread, group and room per UTC day), what
        today has spent against each, and what they hold."""
        raise NotImplementedError

    @operation("PUT", "/v1/budgets", mutates=True, errors=(404,), body="BudgetBody")
    async def set_budget(
        self,
        scope: str,
        tokens: int | None = None,
        cost: float | None = None,
        clear: bool = False,
        by: str = "operator",
    ) -> BudgetsView:
        """Set or raise a budget (both limits None: none for that scope, over
        agentdeck.toml's; `clear`: back to agentdeck.toml's). Turns it held start."""
        raise NotImplementedError

    @operation("POST", "/v1/gc", mutates=True, body="GcBody")
    async def gc(self, dry_run: bool = False, vacuum: bool = False, days: float | None = None,
                 gb: float | None = None) -> GcReport:  # fmt: skip
        """Prune finished turns as [retention] says (`days`, `gb`: these limits, this once):
        their steps and events go, their summary, calls and decisions stay; `dry_run`: only
        say what would go; `vacuum`: give all freed space back to the disk."""
        raise NotImplementedError

    @operation("GET", "/v1/audit", mutates=False,
               constraints={"limit": {"ge": 1, "le": 1000}, "kind": {"pattern": "^(decision|rule)$"},
                            "thread": {"max_length": 4096}, "decided_by": {"max_length": 4096},
                            "after": {"max_length": 8192}})  # fmt: skip
    async def audit(
        self,
        since: float | None = None,
        thread: str | None = None,
        decided_by: str | None = None,
        kind: str | None = None,
        limit: int = 1000,
        after: str | None = None,
    ) -> AuditPage:
        """Every decision of the room, oldest first: operators', the deadline's (each a row
        of the decisions table, kind `decision`) and rules' verdicts at the gate (kind
        `rule`); recorded at `since` (Unix seconds) or later, of `thread`, decided by
        `decided_by` (as an entry names it), of one `kind`; a page of `limit`, the next
        one from `after` (a page's `next`)."""
        raise NotImplementedError

    @operation("GET", "/v1/diff", mutates=False, errors=(404,),
               constraints={"turn_a": {"min_length": 1, "max_length": 4096},
                            "turn_b": {"min_length": 1, "max_length": 4096}})  # fmt: skip
    async def diff(self, turn_a: str, turn_b: str) -> TurnDiff:
        """Two turns side by side (a replay and its original, or any two): each one's facts
        (model, strategy, outcome, times, tokens, cost, steps) and their messages and calls
        aligned, each row the same, changed (arguments, results, decisions) or in one turn
        only; read from the room's history (404: no such turn)."""
        raise NotImplementedError

    async def follow(
        self, receive: Receive, resync: Resync, *, watch: Watch | None = None,
        task_status: TaskStatus[None] = IGNORED,
    ) -> None:  # fmt: skip
        """Hand every event of the lanes `watch` names (engine/api/watch.py; default: all
        of them) to `receive`, in order, until cancelled; a change of `watch` applies from
        then on. `task_status` is told once nothing published from then on can be missed
        (start it with `tg.start`). When events were missed (a slow reader, a new owner),
        `resync` is awaited: reload state from the truth, then events go on. Raises
        `OwnerGone` when nobody serves the room any more."""
        raise NotImplementedError

    async def recent(self) -> Recent:
        """What a console shows first: threads, recent turns, steps and calls, read from
        execution.db (read-only: the same in the owner's process and any other)."""
        from engine.store.recent import read_recent

        return await read_recent(self.room)

    async def conversation(self, thread_id: str, limit: int) -> Conversation:
        """A thread's newest stored messages, and how its turns ended."""
        from engine.store.recent import read_conversation

        return await read_conversation(self.room, thread_id, limit)

    def new_id(self, prefix: str) -> str:
        """A fresh id (decisions name themselves, so a retry is recognised)."""
        import uuid

        return f"{prefix}_{uuid.uuid4().hex[:16]}"

    async def aclose(self) -> None:
        return None
