"""The one path between the runtime and the widgets, in both directions.

Runtime events arrive on the event loop (the host hands `receive` to the client's event
stream: the runtime's own subscription when hosted, the owner's API when attached); the
callback only appends to a buffer. A timer folds the buffer into `DeckState` once per frame and
posts a single `Bridge.Changed` to the main screen, so widgets redraw at most once a frame
however fast the runtime produces events. Operator actions (send, decide, cancel) go the
other way through the same object to the room's client (in-process when this console
hosts the runtime, the owner's API when it is attached), so no widget holds either.

Three rules keep key presses quick under a flood, and all the pacing is here: the screen
draws the panes `take` says are due, nothing more. A frame folds as many events as arrive
in a frame on average (a little more, so a backlog never grows) and then more for at most
`FOLD_BUDGET` seconds: a burst is caught up over a few short frames instead of one long
one. While the screen has not drawn the last `Changed`, later frames add to the same
`Changes` instead of posting another message. And in a flood (changes of `BUSY_EVENTS`
events, and until `CATCH_UP` seconds passed without such changes: a frame that caught
only a few events, because the loop was busy or a key asked for a pane, is still in it)
the right column (timeline, calls) and the chat take turns, one per frame, and the status
bar waits `STATUS_EVERY`: a frame that repaints panes far apart repaints the whole screen,
and that one long paint is what a key press would wait behind. What a flood leaves undrawn
is drawn by a later frame of its side, and all of it once the flood is over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump
from textual.timer import Timer

from console.state import Changes, DeckState
from engine.api.watch import Watch
from engine.domain.events import Event

if TYPE_CHECKING:  # (the client's modules load with the runtime, after the first screen)
    from engine.api.client import RoomClient
    from engine.api.models import (
        Submitted,
        ThreadInstructions,
    )
    from engine.api.tool_models import ToolsView
    from engine.api.usage_models import BudgetsView
    from engine.services.scheduler import GroupConfig, Statistics

FPS = 20  # frames a second for runtime changes (keys repaint at once, not at this rate)
FOLD_BUDGET = 0.004  # seconds of folding a backlog per frame, so a key never waits long
FOLD_SLICE = 256  # events folded between looks at the clock
BUSY_EVENTS = 500  # changes that folded this many events are a flood (for CATCH_UP more)
STATUS_EVERY = 0.5  # seconds between status bar draws in a flood
CATCH_UP = 0.15  # seconds after the last events, what a flood left undrawn is drawn

# The panes the bridge paces (the screen draws each from the state); in a flood the sides
# take turns.
TIMELINE, CALLS, CHAT, STATUS = "timeline", "calls", "chat", "status"
SIDES = (frozenset({TIMELINE, CALLS}), frozenset({CHAT}))


@dataclass(frozen=True)
class RunInfo:
    """What the status bar shows about the run."""

    room: str
    run_id: str
    model: str
    mode: str = "hosted"  # or "attached to pid N"


class Bridge:
    """Buffers runtime events, folds them per frame, and carries operator actions back."""

    class Changed(TextualMessage):
        """Changes since the screen last drew (never one message per event).

        The handler takes them with `Bridge.take`; until it does, the bridge adds later
        frames to the same `Changes` and posts nothing more.
        """

        def __init__(self, changes: Changes) -> None:
            super().__init__()
            self.changes = changes

    class Attached(TextualMessage):
        """The runtime is reachable and the room's state is loaded (again, after a gap)."""

        def __init__(self, info: RunInfo) -> None:
            super().__init__()
            self.info = info

    class Detached(TextualMessage):
        """The runtime is no longer reachable: its owner stopped or died. `free` says the
        room has no owner now (this console could host it)."""

        def __init__(self, why: str, free: bool) -> None:
            super().__init__()
            self.why, self.free = why, free

    def __init__(self, state: DeckState | None = None, fps: int = FPS,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.state = state or DeckState()
        self.fps = fps
        self.clock = clock  # for pacing (seconds); tests pass their own
        self.client: RoomClient | None = None
        self.watch = Watch(self.state.lanes())  # what the event stream carries
        self.target: MessagePump | None = None
        self._buffer: list[Event] = []
        self._start = 0  # events of `_buffer` before this are folded already
        self._seen = 0  # events of `_buffer` before this had arrived by the last frame
        self._rate = 0.0  # events arriving per frame, a moving average
        self._changes: Changes | None = None  # folded, not yet taken by the screen
        self._posted = False
        self._timer: Timer | None = None
        self.frames = 0
        self._due: set[str] = set()  # panes whose data changed and are not drawn yet
        self._wanted = False  # a pane was asked for (`want`): the next frame posts
        self._side = 0  # the side of SIDES the next flood frame draws
        self._status_at = 0.0  # when the status bar was last due
        self._events_at = 0.0  # when a frame last folded events
        self._flood_at = float("-inf")  # when changes were last a flood
        self._reading_budgets = False

    # -- runtime -> widgets -----------------------------------------------------------------

    def receive(self, event: Event) -> None:
        """The runtime's subscriber: keep the event for the next frame, nothing more."""
        self._buffer.append(event)

    def connect(self, client: RoomClient, target: MessagePump) -> None:
        """Carry actions to `client`; post the changes `receive` gets to `target` once per
        frame (the host hands `receive` to the client's event stream)."""
        self.client, self.target = client, target
        self.state.tools.reread = self._reread_tools
        if self._timer is None:
            self._timer = target.set_interval(1 / self.fps, self.tick, name="bridge")

    def disconnect(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.client = None
        self.state.tools.reread = None

    def restart(self) -> None:
        """Events were missed: forget what is buffered and what the state holds, so the
        host can read the room's state again (the events after that fold on top)."""
        self._buffer, self._start, self._seen, self._changes = [], 0, 0, None
        self.state.clear()

    def flush(self, budget: float | None = None) -> Changes | None:
        """Fold what arrived since the last frame and tell the screen, once.

        With a `budget` (seconds), fold a frame's average arrivals, then more until the
        budget is spent; the rest waits for the next frame.
        """
        buffer, start = self._buffer, self._start
        if start >= len(buffer):
            return None
        state = self.state
        changes = self._changes if self._changes is not None else Changes()
        if budget is None:
            state.fold(buffer[start:] if start else buffer, changes)
            end = len(buffer)
        else:
            deadline = time.perf_counter() + budget
            self._rate = 0.8 * self._rate + 0.2 * (len(buffer) - self._seen)
            must = 1.25 * self._rate + 1
            end = start
            while end < len(buffer):
                state.fold(buffer[end : end + FOLD_SLICE], changes)
                end = min(end + FOLD_SLICE, len(buffer))
                if end - start >= must and time.perf_counter() >= deadline:
                    break
        if end >= len(buffer):
            self._buffer, self._start = [], 0
        elif end > len(buffer) // 2:  # drop the folded half, so the buffer stays bounded
            self._buffer, self._start = buffer[end:], 0
        else:
            self._start = end
        self._seen = len(self._buffer)
        self._changes = changes
        self.frames += 1
        self._events_at = self.clock()
        self._post()
        return changes

    def _post(self) -> None:
        if self.target is not None and not self._posted:
            self._posted = True
            if self._changes is None:
                self._changes = Changes()
            self.target.post_message(self.Changed(self._changes))

    def tick(self) -> None:
        """One frame (the timer's): fold what arrived, and tell the screen if anything is
        to draw."""
        if self.flush(FOLD_BUDGET) is None and self._due:
            # No events this frame, panes still due: a key asked for one, or a flood is over.
            quiet = self.clock() - max(self._events_at, self._flood_at)
            if self._wanted or quiet >= CATCH_UP:
                self._post()

    def want(self, pane: str) -> None:
        """Draw `pane` with the next frame (a key changed what it shows): once a frame,
        however fast the keys come."""
        self._due.add(pane)
        self._wanted = True

    def take(self, thread_id: str = "", turn_id: str = "") -> tuple[Changes, frozenset[str]]:
        """The changes folded since the last take, and the panes to draw now (the chat if
        it shows `thread_id`, the calls pane if it shows `turn_id`); the next frame posts
        `Changed` again."""
        changes, self._changes, self._posted = self._changes, None, False
        ch = changes if changes is not None else Changes()
        due = self._due
        if ch.steps:
            due.add(TIMELINE)
        if thread_id in ch.threads:
            due.add(CHAT)
        if turn_id in ch.turns:
            due.add(CALLS)
        if ch.turns or ch.spend:
            due.add(STATUS)
        now = self.clock()
        if ch.events >= BUSY_EVENTS:
            self._flood_at = now
        if now - self._flood_at < CATCH_UP:
            draw = due & SIDES[self._side]
            self._side = 1 - self._side
            if STATUS in due and now - self._status_at >= STATUS_EVERY:
                draw.add(STATUS)
        else:
            draw = set(due)
        if STATUS in draw:
            self._status_at = now
        due -= draw
        self._wanted = False
        return ch, frozenset(draw)

    @property
    def backlog(self) -> int:
        return len(self._buffer) - self._start

    # -- widgets -> runtime -----------------------------------------------------------------

    @property
    def api(self) -> RoomClient:
        """The room's operations (engine/api/operations.py) on the runtime reachable now,
        hosted or attached: `bridge.api.rules()`. RuntimeError while none is."""
        if self.client is None:
            raise RuntimeError("the runtime is not reachable now")
        return self.client

    async def send(self, thread_id: str, text: str) -> Submitted:
        """Send an operator chat message; return its request (durable by then)."""
        from engine.api.models import SubmitBody

        body = SubmitBody(origin="chat", channel="console", sender="operator",
                          thread_id=thread_id, text=text)  # fmt: skip
        return await self.api.submit(body)

    async def compact(self, thread_id: str, undo: bool = False) -> Submitted:
        """Compact the thread now (`undo`: undo its last compaction): a turn of its own."""
        from engine.api.models import SubmitBody

        body = SubmitBody(origin="invoke", sender="operator", thread_id=thread_id,
                          text="undo the last compaction" if undo else "compact this thread",
                          strategy="uncompact" if undo else "compact")  # fmt: skip
        return await self.api.submit(body)

    def decision_id(self) -> str:
        """A decision id from the runtime's id source (fixed in tests)."""
        return self.api.new_id("d")

    async def cancel_turn(self, turn_id: str) -> bool:
        """Cancel a turn; False when it had already ended."""
        return (await self.api.cancel(turn_id)).cancelled

    async def statistics(self) -> Statistics | None:
        """The scheduler's snapshot, for the scheduler view's timer (never per event);
        None while no runtime is reachable."""
        return await self.client.statistics() if self.client is not None else None

    async def configure_group(self, name: str, **changes: Any) -> GroupConfig:
        """Pause, resume or re-budget a thread group; the runtime applies and persists it."""
        from engine.api.models import GroupChange

        return await self.api.configure_group(name, GroupChange(**changes))

    async def instructions(self, thread_id: str) -> ThreadInstructions:
        """What a new turn on `thread_id` is told, part by part (the instructions view)."""
        return await self.api.instructions(thread_id)

    async def set_instructions(self, thread_id: str, text: str | None) -> ThreadInstructions:
        """Set the thread's own instructions (None or blank: none); what it is told now."""
        return await self.api.set_instructions(thread_id, text)

    async def set_budget(self, scope: str, *, tokens: int | None = None, cost: float | None = None,
                         clear: bool = False) -> BudgetsView:  # fmt: skip
        """Set or raise a daily budget (both None: none for `scope`; `clear`: back to
        agentdeck.toml's); the runtime stores it and starts the turns it held. What the
        budgets hold now goes to the status bar."""
        view = await self.api.set_budget(scope, tokens=tokens, cost=cost, clear=clear)
        self.state.spend.load(view, spent=False)
        self.want(STATUS)
        return view

    async def read_budgets(self) -> None:
        """Read what the room's budgets hold into the status bar (the room says nothing
        when a hold ends: console/spend.py); one read at a time, none while detached."""
        if self.client is None or self._reading_budgets:
            return
        self._reading_budgets = True
        try:
            view = await self.client.budgets()
        except Exception:  # the owner went away: the screen hears it from the host
            return
        finally:
            self._reading_budgets = False
        self.state.spend.load(view, spent=False)
        self.want(STATUS)

    async def read_tools(self) -> ToolsView:
        """Read the room's tools, their servers and the shell's sandbox (the tools screen);
        the decision card and the queue (and the status bar) draw from what it says."""
        view = await self.api.tools()
        self.state.tools.load(view)
        if self._changes is None:
            self._changes = Changes()
        self._changes.pending = True  # the card's lines and keys, as the reading says
        self.want(STATUS)
        return view

    def _reread_tools(self) -> None:
        """A call of a tool the last reading did not list: read the room again."""
        if self.target is not None and self.client is not None:
            self.target.run_worker(self._read_tools_quietly(), group="tools")  # type: ignore[attr-defined]

    async def _read_tools_quietly(self) -> None:
        try:
            await self.read_tools()
        except Exception:  # the owner went away: the screen hears it from the host
            return
