"""Every room of this machine, followed live for the rooms overview and its inbox (`o`).

The rooms are the machine's registry's (engine/rooms_registry.py). Each serving room gets
one light client while the overview is open: a `RemoteClient` over its own socket, one
event stream watching only its decision queue and its turn counts, folded by a `Bridge`
of its own into a `DeckState` of its own, so a decision taken here goes through that
room's bridge exactly as in a console attached to it (the same `Decider`, the same
binding to the arguments shown). Its counts of turns (running, waiting) are read from its
scheduler when a turn starts or moves, at most every COUNTS_EVERY seconds; its waiting
calls are its state's `pending`. An inbox of ten rooms costs each room one stream.

The registry is looked at every LOOK_EVERY seconds (rooms that came or went, and each
room's lock). A room whose owner dies shows `owner gone` at the first of: its event
stream breaking (the client then asks the lock, which the kernel freed), or the next look.
Its calls leave the inbox (nothing can decide them until an owner serves the room again);
a new owner's registration is followed afresh.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump

from console.bridge import Bridge
from console.rows import CallRow, Changes
from engine import rooms_registry
from engine.api.machine import GONE, OTHER, SERVING, SILENT, labels, needs_input_first
from engine.api.watch import COUNTS, QUEUE, Watch
from engine.lifecycle import CallStatus
from engine.room import Room

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.rooms_registry import Looked, Registration

LOOK_EVERY = 1.0  # seconds between looks at the registry and the rooms' locks
COUNTS_EVERY = 0.25  # seconds at least between two readings of a room's counts
FPS = 10  # frames a second a room's bridge folds its events in
CONNECTING = "connecting"
THREAD_MARK = " › "  # between a room's label and a thread's id, in the inbox


class Feed:
    """One registered room as the overview follows it."""

    def __init__(self, reg: Registration, label: str) -> None:
        self.reg, self.label = reg, label
        self.bridge = Bridge(fps=FPS)
        self.bridge.watch = Watch([QUEUE, COUNTS])  # the queue and the counts, nothing else
        self.owner, self.why = CONNECTING, ""
        self.running: int | None = None
        self.waiting: int | None = None
        self.workspace = Room(reg.room).workspace
        self.scope: anyio.CancelScope | None = None  # its follower's, while one runs
        self.due = anyio.Event()  # its counts are to be read again
        self.decider: Any = None  # the screen's Decider on this room's bridge

    @property
    def room(self) -> Path:
        return self.reg.room

    @property
    def serving(self) -> bool:
        return self.owner == SERVING

    @property
    def decisions(self) -> int | None:
        return len(self.bridge.state.pending) if self.serving else None

    def stop(self, owner: str, why: str) -> None:
        """Its owner no longer serves: stop following, forget its calls."""
        if self.scope is not None:
            self.scope.cancel()
        self.owner, self.why = owner, why
        self.running = self.waiting = None

    def shown(self, call: CallRow) -> CallRow:
        """`call` as the inbox shows it: its thread named with the room's label."""
        return replace(call, thread_id=f"{self.label}{THREAD_MARK}{call.thread_id}")


class Machine:
    """The registry's rooms, each followed while `run` runs (in the screen's worker)."""

    class Changed(TextualMessage):
        """Rooms came or went, or an owner, a room's counts or its calls changed."""

    def __init__(self, target: MessagePump, where: Path | None = None,
                 look_every: float = LOOK_EVERY) -> None:  # fmt: skip
        self.target, self.where, self.look_every = target, where, look_every
        self.feeds: dict[Path, Feed] = {}  # by room, the registry's order (oldest owner first)
        self.problems: list[str] = []  # files in the registry that are not entries
        self.looks = 0  # looks at the registry so far (tests wait on it)
        self._tg: anyio.abc.TaskGroup | None = None
        self._posted = False

    # -- following ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Look at the registry every `look_every` seconds and follow each serving room,
        until cancelled (the screen closes)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                while True:
                    await self.look()
                    await anyio.sleep(self.look_every)
        finally:
            for feed in self.feeds.values():
                feed.bridge.disconnect()

    async def look(self) -> None:
        """Read the registry and each room's lock; start following new rooms, stop those
        whose owner is gone."""
        found, self.problems = await anyio.to_thread.run_sync(rooms_registry.looked, self.where)
        self.looks += 1
        names = labels(lk.reg.room for lk in found)
        feeds: dict[Path, Feed] = {}
        for looked in found:
            room = looked.reg.room
            feed = self.feeds.pop(room, None)
            if feed is not None and feed.reg != looked.reg:  # a new owner: followed afresh
                feed.stop(GONE, "")
                feed = None
            if feed is None:
                feed = Feed(looked.reg, names[room])
                if looked.seen == "serving":
                    self._start(feed)
            feed.label = names[room]
            feeds[room] = feed
            self._judge(feed, looked)
        for left in self.feeds.values():  # unregistered: its owner stopped serving
            left.stop(GONE, "")
            left.bridge.disconnect()
        self.feeds = feeds
        self.changed()

    def _judge(self, feed: Feed, looked: Looked) -> None:
        """What the lock says of a followed room."""
        if looked.seen == "gone" and feed.owner != GONE:
            feed.stop(GONE, "nobody holds the room's lock: its owner stopped or died")
        elif looked.seen == "other" and feed.owner != OTHER:
            feed.stop(OTHER, f"held by {looked.holder}, which serves no API here")
        elif looked.seen == "serving" and feed.owner in (SILENT, OTHER) and feed.scope is None:
            self._start(feed)  # its owner answers again, or registered again

    def _start(self, feed: Feed) -> None:
        if self._tg is not None:
            feed.owner, feed.why = CONNECTING, ""
            self._tg.start_soon(self._follow, feed)

    async def _follow(self, feed: Feed) -> None:
        """Follow one room until its owner goes or the overview closes."""
        from engine.api.remote import RemoteClient

        client = RemoteClient(Room(feed.reg.room))
        bridge = feed.bridge

        async def resync() -> None:  # events were missed (a gap, a new run): read again
            bridge.restart()
            await self._seed(feed, client)

        with anyio.CancelScope() as scope:
            feed.scope = scope
            try:
                bridge.connect(client, self.target)
                async with anyio.create_task_group() as tg:
                    follow = functools.partial(client.follow, watch=bridge.watch)
                    await tg.start(follow, bridge.receive, resync)
                    await self._seed(feed, client)
                    feed.owner, feed.why = SERVING, ""
                    self.changed()
                    await self._counts(feed, client)
            except Exception as exc:  # (a group of one: the follower's OwnerGone)
                await self._lost(feed, _leaf(exc))
        feed.scope = None
        bridge.disconnect()
        bridge.restart()  # its calls leave the inbox: nothing can decide them now
        self.changed()

    async def _lost(self, feed: Feed, exc: BaseException) -> None:
        """Its stream or a reading failed: the lock says whether the owner is gone."""
        looked = await anyio.to_thread.run_sync(rooms_registry.look, feed.reg)
        if looked.seen == "gone":
            feed.stop(GONE, "nobody holds the room's lock: its owner stopped or died")
        elif looked.seen == "other":
            feed.stop(OTHER, f"held by {looked.holder}, which serves no API here")
        else:
            feed.stop(SILENT, " ".join(str(exc).split()) or type(exc).__name__)

    async def _seed(self, feed: Feed, client: RoomClient) -> None:
        """The room's waiting calls and its tools, read once the stream is on."""
        state = feed.bridge.state
        for p in await client.pending():
            state.add_call(CallRow(p.call_id, p.turn_id, p.thread_id, p.tool, p.args,
                                   CallStatus.SUSPENDED, error=p.reason or None,
                                   created_at=p.since, updated_at=p.since,
                                   deadline_at=p.deadline_at, on_deadline=p.on_deadline,
                                   awaiting=p.awaiting))  # fmt: skip
        try:
            state.tools.load(await client.tools())  # (the card's sandbox line and keys)
        except Exception:  # an owner of an older release: the card says less
            pass
        feed.due.set()

    async def _counts(self, feed: Feed, client: RoomClient) -> None:
        """Read the room's counts whenever its turns moved (at most every COUNTS_EVERY)."""
        while True:
            await feed.due.wait()
            feed.due = anyio.Event()
            stats = await client.statistics()
            feed.running, feed.waiting = stats.running, sum(g.waiting for g in stats.groups)
            self.changed()
            await anyio.sleep(COUNTS_EVERY)

    # -- for the screen ----------------------------------------------------------------------

    def changed(self) -> None:
        """Tell the screen, once until it has taken the change (`took`)."""
        if not self._posted:
            self._posted = True
            self.target.post_message(self.Changed())

    def took(self) -> None:
        self._posted = False

    def take(self) -> list[tuple[Feed, Changes]]:
        """What each room's bridge folded since the screen last took it (a room whose
        turns moved has its counts read again)."""
        taken = []
        for feed in self.feeds.values():
            changes, _ = feed.bridge.take()
            if changes.turns:
                feed.due.set()
            if changes:
                taken.append((feed, changes))
        return taken

    def waiting(self, room: Path | None = None) -> list[tuple[Feed, CallRow]]:
        """Every serving room's waiting calls (or `room`'s), needs input first
        (engine/api/machine.py)."""
        calls = [(feed, call) for feed in self.feeds.values()
                 if feed.serving and (room is None or feed.room == room)
                 for call in feed.bridge.state.pending.values()]  # fmt: skip
        calls.sort(key=lambda fc: needs_input_first(fc[1].deadline_at, fc[1].updated_at,
                                                    str(fc[0].room), fc[1].call_id))  # fmt: skip
        return calls

    def decided(self) -> dict[str, str]:
        """The calls of every room whose decision is on its way (their rows say so)."""
        return {k: v for feed in self.feeds.values() for k, v in feed.bridge.state.decided.items()}

    def prune(self) -> list[Registration]:
        """Forget the registry's rooms whose owner is gone (engine/rooms_registry.py)."""
        return rooms_registry.prune(self.where)


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
