"""What a client follows of the runtime's events: lanes, and the watch that names them.

Every event goes into one or more lanes; a client's event stream (the API's, or an
in-process `follow`) carries only the events of the lanes it watches:

- `queue`: the decision queue: calls as they suspend and as they leave `suspended`, and
  decisions.
- `counts`: turns as they start and move (the status bar, the thread list, the scheduler).
- `notices`: notices and deliveries to channels.
- `activity`: every thread's steps and calls (the room-wide timeline and calls pane),
  delivered a few times a second: a person reads it, and a busy room sends it in batches.
- `thread:ID`: everything of one thread (its chat, its streaming text, its steps and
  calls), as it happens.
- `call:ID`: one call's changes and decisions.
- `all`: every event (the CLI's `watch`, tools that mirror the room) but one kind: a
  running call's output goes only to its thread's and its call's lanes, so a command
  that prints fast reaches only those who watch it and never pushes the room's events out
  of the `all` ring.

The API keeps a bounded ring per lane (engine/api/hub.py), so a noisy thread cannot push
the queue's events out of reach of a client that watches the queue.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.domain.events import Event

ALL, QUEUE, COUNTS, NOTICES, ACTIVITY = "all", "queue", "counts", "notices", "activity"
KINDS = frozenset({ALL, QUEUE, COUNTS, NOTICES, ACTIVITY})  # the lanes every runtime keeps
PER = ("thread:", "call:")  # lanes of one thread or one call: `thread:ID`, `call:ID`
SLOW = frozenset({ACTIVITY})  # lanes a stream delivers a few times a second, not at once
MAX_LANES = 64  # lanes one stream may watch
MAX_ID = 4096  # characters of a thread's or a call's id in a lane's name
WAITING_KEPT = 10_000  # suspended calls remembered (their leaving goes to `queue`)


def thread(thread_id: str) -> str:
    return f"thread:{thread_id}"


def call(call_id: str) -> str:
    return f"call:{call_id}"


def lane_problem(name: str) -> str | None:
    """Why `name` is not a lane (None when it is one)."""
    if name in KINDS:
        return None
    for prefix in PER:
        if name.startswith(prefix):
            size = len(name) - len(prefix)
            return (
                None
                if 0 < size <= MAX_ID
                else f"{prefix}ID takes an id of 1 to {MAX_ID} characters"
            )
    return f"not a lane: {name[:80]!r} (lanes: {', '.join(sorted(KINDS))}, thread:ID, call:ID)"


def in_lane(name: str, event: Event) -> bool:
    """Whether `event` goes to the thread's or the call's lane `name`."""
    if name.startswith("thread:"):
        return event.thread_id == name[7:]
    return name.startswith("call:") and getattr(event, "call_id", None) == name[5:]


class Lanes:
    """Sorts events into lanes. It remembers which calls are suspended, so the change that
    takes a call out of `suspended` goes to the queue too."""

    def __init__(self) -> None:
        self._waiting: OrderedDict[str, None] = OrderedDict()

    def of(self, event: Event) -> list[str]:
        """The lanes `event` goes to, `all` first (a call's output: its thread's and its
        call's only)."""
        kind = event.kind
        if kind == "call_output":
            return [thread(event.thread_id), call(event.call_id)]  # type: ignore[union-attr]
        lanes = [ALL]
        if event.thread_id:
            lanes.append(thread(event.thread_id))
        if kind == "call_changed":
            lanes += (ACTIVITY, call(event.call_id))  # type: ignore[union-attr]
            if event.status == "suspended":  # type: ignore[union-attr]
                self._waiting[event.call_id] = None  # type: ignore[union-attr]
                if len(self._waiting) > WAITING_KEPT:
                    self._waiting.popitem(last=False)
                lanes.append(QUEUE)
            elif self._waiting.pop(event.call_id, 0) is None:  # type: ignore[union-attr]
                lanes.append(QUEUE)
        elif kind in ("step_started", "step_finished"):
            lanes.append(ACTIVITY)
        elif kind in ("turn_started", "turn_changed"):
            lanes.append(COUNTS)
        elif kind == "decision_recorded":
            lanes += (QUEUE, call(event.call_id))  # type: ignore[union-attr]
        elif kind in ("notice", "delivery_changed"):
            lanes.append(NOTICES)
        return lanes


class Watch:
    """The lanes a client follows; it may change them while it follows (the console, when
    the operator opens another thread). A follower started from it takes the change."""

    def __init__(self, lanes: Iterable[str] = (ALL,)) -> None:
        self.lanes = self._checked(lanes)
        self._listeners: list[Callable[[], None]] = []

    def set(self, lanes: Iterable[str]) -> None:
        """Follow `lanes` from now on (the events of a lane added are those after now)."""
        lanes = self._checked(lanes)
        if lanes != self.lanes:
            self.lanes = lanes
            for listener in list(self._listeners):
                listener()

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (sync, quick) when the lanes change; returns the way to stop."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def wants(self, lanes: list[str]) -> bool:
        return not self.lanes.isdisjoint(lanes)

    @staticmethod
    def _checked(lanes: Iterable[str]) -> frozenset[str]:
        lanes = frozenset(lanes)
        if len(lanes) > MAX_LANES:
            raise ValueError(f"a watch follows at most {MAX_LANES} lanes")
        for name in lanes:
            if (problem := lane_problem(name)) is not None:
                raise ValueError(problem)
        return lanes
