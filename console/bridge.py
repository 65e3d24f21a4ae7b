"""The one path between the runtime and the widgets, in both directions.

Runtime events arrive synchronously on the event loop (`Runtime.subscribe`); the callback
only appends to a buffer. A timer folds the buffer into `DeckState` once per frame and
posts a single `Bridge.Changed` to the main screen, so widgets redraw at most once a frame
however fast the runtime produces events. Operator actions (send, decide, cancel) go the
other way through the same object, so no widget holds the runtime.

Two rules keep key presses quick under a flood. A frame folds as many events as arrive
in a frame on average (a little more, so a backlog never grows) and then more for at most
`FOLD_BUDGET` seconds: a burst is caught up over a few short frames instead of one long
one. And while the screen has not drawn the last `Changed`, later frames add to the same
`Changes` instead of posting another message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump
from textual.timer import Timer

from console.state import Changes, DeckState
from engine.decisions import Decision
from engine.events import Event
from engine.messages import Message

if TYPE_CHECKING:
    from engine.runtime import Runtime
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
        """The runtime is open and the history is loaded."""

        def __init__(self, info: RunInfo, threads: list[str]) -> None:
            super().__init__()
            self.info, self.threads = info, threads

    def __init__(self, state: DeckState | None = None, fps: int = FPS) -> None:
        self.state = state or DeckState()
        self.fps = fps
        self.runtime: Runtime | None = None
        self.target: MessagePump | None = None
        self._buffer: list[Event] = []
        self._start = 0  # events of `_buffer` before this are folded already
        self._seen = 0  # events of `_buffer` before this had arrived by the last frame
        self._rate = 0.0  # events arriving per frame, a moving average
        self._changes: Changes | None = None  # folded, not yet taken by the screen
        self._posted = False
        self._timer: Timer | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.frames = 0

    # -- runtime -> widgets -----------------------------------------------------------------

    def receive(self, event: Event) -> None:
        """The runtime's subscriber: keep the event for the next frame, nothing more."""
        self._buffer.append(event)

    def attach(self, runtime: Runtime, target: MessagePump) -> None:
        """Start taking events from `runtime`; post changes to `target` once per frame."""
        self.runtime, self.target = runtime, target
        self._unsubscribe = runtime.subscribe(self.receive)
        self._timer = target.set_interval(1 / self.fps, self._tick, name="bridge")

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.runtime = None

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

    def _rt(self) -> Runtime:
        if self.runtime is None:
            raise RuntimeError("the runtime is not open yet")
        return self.runtime

    async def send(self, thread_id: str, text: str) -> str:
        """Send an operator chat message; return the id of its turn."""
        message = Message(origin="chat", channel="console", sender="operator",
                          thread_id=thread_id, text=text)  # fmt: skip
        handle = await self._rt().submit(message)
        return handle.turn_id

    async def decide(self, decision: Decision) -> str:
        return await self._rt().decide(decision)

    def decision_id(self) -> str:
        """A decision id from the runtime's id source (fixed in tests)."""
        return self._rt().new_id("d")

    async def cancel_turn(self, turn_id: str, reason: str = "cancelled by operator") -> bool:
        return await self._rt().cancel_turn(turn_id, reason)

    def why_queued(self, request_id: str) -> str | None:
        """Why a request sent from here still waits (None: it started, or no runtime)."""
        return self.runtime.why_queued(request_id) if self.runtime is not None else None

    def statistics(self) -> Statistics | None:
        """The scheduler's snapshot, for the scheduler view's timer (never per event);
        None while the runtime is not open."""
        return self.runtime.statistics() if self.runtime is not None else None

    async def configure_group(self, name: str, **changes: object) -> GroupConfig:
        """Pause, resume or re-budget a thread group; the runtime applies and persists it."""
        return await self._rt().configure_group(name, **changes)
