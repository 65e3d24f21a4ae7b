"""What the main screen tells the operator, apart from what its panes draw: toasts and the
bell. The runtime gone and back (one toast, withdrawn when it is over), calls waiting in
other threads (those of the thread shown are on the chat's card), calls under review after
a crash (console/screens/review.py), a decision of this console that lost or was refused,
and the runtime's notices (a flood summed up)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.widgets import Input

from console.attention import Attention
from console.screens.review import tell_reviews
from console.state import Changes, DeckState
from console.widgets.decision_queue import DecisionQueue
from engine.lifecycle import DecisionStatus

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.app import AgentDeck
    from console.bridge import RunInfo

MAX_NOTICES = 3  # toasts per frame; a flood of notices is summed up, not shown one by one
REVIEW_NOTICE = "was running when agentdeck stopped"  # engine.decisions.review.notice_text's words
RUNTIME, QUEUE = "runtime", "queue"  # the conditions a toast is about (one toast each)


class Teller:
    """The screen's toasts; `mine` are the ids of the decisions taken in this console."""

    def __init__(self, screen: Screen[Any], state: DeckState, mine: set[str],
                 attention: Callable[[], Attention]) -> None:  # fmt: skip
        self.screen, self.state, self.mine = screen, state, mine
        self.attention = attention  # the screen's, as it is now (a test may replace it)
        self.reviews_told: set[str] = set()  # calls under review the operator was told of

    @property
    def deck(self) -> AgentDeck:
        return cast("AgentDeck", self.screen.app)

    def runtime_back(self, info: RunInfo, was_gone: bool) -> None:
        """Attached (again): what the "runtime gone" toast said is over."""
        if was_gone:
            again = ("This console hosts the room's runtime now." if info.mode == "hosted" else
                     f"Attached to the room's runtime again ({info.mode}).")  # fmt: skip
            self.deck.notify(again, title="Runtime", condition=RUNTIME)
        tell_reviews(self.screen, self.state.pending, self.reviews_told)

    def runtime_gone(self, why: str, free: bool) -> None:
        if free:
            text = ("Nobody owns the room now: ctrl+o hosts it here; this console also "
                    "attaches again when a runtime starts.")  # fmt: skip
        else:
            text = (f"{why[:1].upper()}{why[1:]}. This console attaches again when a runtime "
                    "serves the room.")  # fmt: skip
        self.deck.notify(text, title="Runtime gone", severity="warning", timeout=30,
                         condition=RUNTIME)  # fmt: skip

    def changes(self, ch: Changes, thread_id: str) -> None:
        """Everything a frame's changes have to say."""
        pending = self.state.pending
        reviews = tell_reviews(self.screen, pending, self.reviews_told) if ch.pending else 0
        if ch.new_pending:  # once per redraw, however many came
            self._ask_attention(ch.new_pending)
        here = ch.new_pending_threads.count(thread_id)  # the shown thread's: on the card
        elsewhere = ch.new_pending - reviews - here
        focused = self.screen.focused
        if elsewhere > 0 and not isinstance(focused, DecisionQueue):
            n, total = elsewhere, len(pending)
            # `d` is a letter: in the chat input it types, so the way there is said too
            where = "Esc, then d" if isinstance(focused, Input) else "press d"
            plural = "s" if n > 1 else ""
            calls = f"{n} call{plural}" if total <= n else f"{n} more call{plural} ({total} in all)"
            self.deck.notify(f"{calls} waiting for a decision ({where})", title="Decision queue",
                             condition=QUEUE)  # fmt: skip
        if ch.pending and not pending:
            self.deck.withdraw(QUEUE)  # nothing waits: what the toast said is over
        self._lost(ch)
        notices = [n for n in ch.notices if REVIEW_NOTICE not in n.text]  # told once, above
        for notice in notices[:MAX_NOTICES]:
            level = "information" if notice.level == "info" else notice.level  # Textual's word
            self.deck.notify(notice.text, severity=level)
        if len(notices) > MAX_NOTICES:
            self.deck.notify(f"{len(notices) - MAX_NOTICES} more notices", severity="warning")

    def _lost(self, ch: Changes) -> None:
        """A decision of this console that another beat, or the engine refused."""
        for lost in (d for d in ch.decisions if d.decision_id in self.mine):
            if lost.status == DecisionStatus.DUPLICATE:  # another decision came first
                self.mine.discard(lost.decision_id)
                self.deck.notify(f"Your decision on {lost.call_id} was not applied: "
                                 f"{lost.note or 'the call was already decided'}.",
                                 title="Decided elsewhere", severity="warning")  # fmt: skip
            elif lost.status == DecisionStatus.REFUSED:  # nothing ran; the call still waits
                self.mine.discard(lost.decision_id)
                self.deck.notify(f"Your decision on {lost.call_id} was refused: {lost.note}. "
                                 "The call still waits.", title="Nothing ran", severity="error")  # fmt: skip

    def _ask_attention(self, new: int) -> None:
        """Calls started waiting: the bell, and a desktop notification where it shows."""
        newest = list(self.state.pending.values())[-1:]
        what = f"{newest[0].tool} on {newest[0].thread_id}" if newest else "a tool call"
        self.attention().calls_waiting(
            self.screen.app, new, what + (f" and {new - 1} more" if new > 1 else "")
        )
