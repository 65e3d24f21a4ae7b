"""The one path between the runtime and the widgets, in both directions.

Runtime events arrive synchronously on the event loop (`Runtime.subscribe`); the callback
only appends to a buffer. A timer folds the buffer into `DeckState` once per frame and
posts a single `Bridge.Changed` to the main screen, so widgets redraw at most once a frame
however fast the runtime produces events. Operator actions (send, decide, cancel) go the
other way through the same object, so no widget holds the runtime.
"""

from __future__ import annotations

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

FPS = 30


@dataclass(frozen=True)
class RunInfo:
    """What the status bar shows about the run."""

    room: str
    run_id: str
    model: str


class Bridge:
    """Buffers runtime events, folds them per frame, and carries operator actions back."""

    class Changed(TextualMessage):
        """One frame's worth of changes (never one per event)."""

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
        self._timer = target.set_interval(1 / self.fps, self.flush, name="bridge")

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.runtime = None

    def flush(self) -> Changes | None:
        """Fold what arrived since the last frame and tell the screen, once."""
        if not self._buffer:
            return None
        events, self._buffer = self._buffer, []
        changes = self.state.fold(events)
        self.frames += 1
        if self.target is not None:
            self.target.post_message(self.Changed(changes))
        return changes

    @property
    def backlog(self) -> int:
        return len(self._buffer)

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
