"""The one path between the runtime and the widgets, in both directions.

Runtime events arrive on the event loop (the host hands `receive` to the client's event
stream: the runtime's own subscription when hosted, the owner's API when attached); the
callback only appends to a buffer. A timer folds the buffer into `DeckState` once per frame and
posts a single `Bridge.Changed` to the main screen, so widgets redraw at most once a frame
however fast the runtime produces events. Operator actions (send, decide, cancel) go the
other way through the same object to the room's client (in-process when this console
hosts the runtime, the owner's API when it is attached), so no widget holds either.

Two rules keep key presses quick under a flood. A frame folds as many events as arrive
in a frame on average (a little more, so a backlog never grows) and then more for at most
`FOLD_BUDGET` seconds: a burst is caught up over a few short frames instead of one long
one. And while the screen has not drawn the last `Changed`, later frames add to the same
`Changes` instead of posting another message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump
from textual.timer import Timer

from console.state import Changes, DeckState
from engine.events import Event

if TYPE_CHECKING:  # (the client's modules load with the runtime, after the first screen)
    from engine.api.client import RoomClient
    from engine.api.models import Decided, Submitted
    from engine.decisions import Decision
    from engine.scheduler import GroupConfig, Statistics

FPS = 20  # frames a second for runtime changes (keys repaint at once, not at this rate)
FOLD_BUDGET = 0.004  # seconds of folding a backlog per frame, so a key never waits long
FOLD_SLICE = 256  # events folded between looks at the clock


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

    def __init__(self, state: DeckState | None = None, fps: int = FPS) -> None:
        self.state = state or DeckState()
        self.fps = fps
        self.client: RoomClient | None = None
        self.target: MessagePump | None = None
        self._buffer: list[Event] = []
        self._start = 0  # events of `_buffer` before this are folded already
        self._seen = 0  # events of `_buffer` before this had arrived by the last frame
        self._rate = 0.0  # events arriving per frame, a moving average
        self._changes: Changes | None = None  # folded, not yet taken by the screen
        self._posted = False
        self._timer: Timer | None = None
        self.frames = 0

    # -- runtime -> widgets -----------------------------------------------------------------

    def receive(self, event: Event) -> None:
        """The runtime's subscriber: keep the event for the next frame, nothing more."""
        self._buffer.append(event)

    def connect(self, client: RoomClient, target: MessagePump) -> None:
        """Carry actions to `client`; post the changes `receive` gets to `target` once per
        frame (the host hands `receive` to the client's event stream)."""
        self.client, self.target = client, target
        if self._timer is None:
            self._timer = target.set_interval(1 / self.fps, self._tick, name="bridge")

    def disconnect(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.client = None

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
        if self.target is not None and not self._posted:
            self._posted = True
            self.target.post_message(self.Changed(changes))
        return changes

    def _tick(self) -> None:
        self.flush(FOLD_BUDGET)

    def take(self) -> Changes:
        """The changes folded since the last take; the next frame posts `Changed` again."""
        changes, self._changes, self._posted = self._changes, None, False
        return changes if changes is not None else Changes()

    @property
    def backlog(self) -> int:
        return len(self._buffer) - self._start

    # -- widgets -> runtime -----------------------------------------------------------------

    def _client(self) -> RoomClient:
        if self.client is None:
            raise RuntimeError("the runtime is not reachable now")
        return self.client

    async def send(self, thread_id: str, text: str) -> Submitted:
        """Send an operator chat message; return its request (durable by then)."""
        from engine.api.models import SubmitBody

        body = SubmitBody(origin="chat", channel="console", sender="operator",
                          thread_id=thread_id, text=text)  # fmt: skip
        return await self._client().submit(body)

    async def decide(self, decision: Decision) -> Decided:
        return await self._client().decide(decision)

    def decision_id(self) -> str:
        """A decision id from the runtime's id source (fixed in tests)."""
        return self._client().new_id("d")

    async def cancel_turn(self, turn_id: str, reason: str = "cancelled by operator") -> bool:
        return (await self._client().cancel(turn_id, reason)).cancelled

    async def statistics(self) -> Statistics | None:
        """The scheduler's snapshot, for the scheduler view's timer (never per event);
        None while no runtime is reachable."""
        return await self.client.statistics() if self.client is not None else None

    async def configure_group(self, name: str, **changes: Any) -> GroupConfig:
        """Pause, resume or re-budget a thread group; the runtime applies and persists it."""
        from engine.api.models import GroupChange

        return await self._client().configure_group(name, GroupChange(**changes))
