"""The records the console's panes draw: a tool call, a turn, and what one fold changed.

`DeckState` (console/state.py) keeps them current from the runtime's events; the panes,
the queue and the screens read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.domain.events import DecisionRecorded, Notice
from engine.lifecycle import CallStatus, TurnStatus


@dataclass
class CallRow:
    """One tool call as the calls pane and the decision queue show it."""

    call_id: str
    turn_id: str
    thread_id: str
    tool: str
    args: Any
    status: CallStatus
    result: str | None = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    deadline_at: float | None = None  # suspended: when its deadline decides it
    on_deadline: str | None = None  # what it decides then: cancel or approve
    awaiting: str | None = None  # suspended: a `decision`, or a `review` after a crash

    @property
    def under_review(self) -> bool:
        """It waits for a review: its outcome a crash left unknown (engine.decisions.review)."""
        return self.status == CallStatus.SUSPENDED and self.awaiting == "review"


@dataclass
class TurnRow:
    """A turn's lifecycle and its calls, in order."""

    turn_id: str
    thread_id: str
    status: TurnStatus = TurnStatus.RUNNING
    reason: str | None = None
    started_at: float = 0.0
    text: str = ""
    calls: list[str] = field(default_factory=list)
    input_tokens: int = 0  # summed over the turn's inference steps
    output_tokens: int = 0
    group: str | None = None  # its thread's group, as the runtime said it (None: not said)
    channel: str | None = None  # the channel its message came from (None: not a channel's)
    sender: str = ""
    model: str | None = None  # provider:model that answers it (None: not said)
    window: int | None = None  # that model's context window, in tokens


@dataclass
class Changes:
    """What one fold touched; the screen redraws only these."""

    events: int = 0  # how many events were folded into these changes
    steps: bool = False
    threads: set[str] = field(default_factory=set)
    turns: set[str] = field(default_factory=set)
    pending: bool = False
    new_pending: int = 0
    new_pending_threads: list[str] = field(default_factory=list)  # the thread of each
    notices: list[Notice] = field(default_factory=list)
    decisions: list[DecisionRecorded] = field(default_factory=list)
    deliveries: int = 0  # DeliveryChanged events: the channels screen reads the outbox again
    spend: bool = False  # today's spend or what budgets hold (the status bar)

    def __bool__(self) -> bool:
        return bool(self.steps or self.threads or self.turns or self.pending or self.notices
                    or self.deliveries or self.spend)  # fmt: skip
