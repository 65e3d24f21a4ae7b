"""How the main screen takes a decision: the key's question (engine-side refusals said
first, a question when the row changed under the cursor just before the key), the
decision made from the answer, and its way to the runtime; the detail view's keys come
back through the same path, on the arguments it showed. Marked calls are decided together
behind one confirmation that lists them, each bound to the arguments shown.

A `Decider` belongs to the main screen (`MainScreen.decider`): it runs its questions as the
screen's workers and tells the screen what changed (`redraw_pending`, `act`)."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from console.format import one_line, visible
from console.glyphs import look
from console.pause import WORDS as PAUSE_WORDS
from console.pause import is_pause, summary
from console.screens.call_detail import CallDetailScreen
from console.screens.confirm import ConfirmScreen
from console.screens.deciding import ask_decision
from console.screens.prompt import PromptScreen
from console.state import CallRow
from console.widgets.decision_queue import DecisionQueue
from engine.domain.decisions import Decision

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.bridge import Bridge

MARKED_SHOWN = 12  # marked calls a confirmation lists one by one (then: "and N more")
WORDS = {
    "outside": "Approve, outside the sandbox,",
    "network": "Approve, with the network,",
    **PAUSE_WORDS,
}


class Decider:
    """The decisions of one screen: asked, checked, sent, and remembered as this console's
    own (`mine`, so a decision that lost to another is said)."""

    def __init__(self, screen: Screen[Any], bridge: Bridge,
                 redraw_pending: Callable[[], None],
                 act: Callable[[str, str, Awaitable[Any]], None],
                 workspace: Path | None = None) -> None:  # fmt: skip
        self.screen, self.bridge, self.state = screen, bridge, bridge.state
        self.redraw_pending, self.act = redraw_pending, act
        self._workspace = workspace  # the inbox's: the call's own room's
        self.mine: set[str] = set()  # ids of the decisions taken in this console

    @property
    def workspace(self) -> Path | None:
        """The workspace a call's paths are read in: its room's (this console's, but in the
        inbox of every room)."""
        room = getattr(self.screen.app, "room", None)
        return self._workspace or (room.workspace if room is not None else None)

    def decide(self, action: str, call: CallRow, ask: str = "") -> None:
        self.screen.run_worker(self._decide(action, call, ask), group="decide")

    def decide_marked(self, action: str, calls: list[CallRow]) -> None:
        self.screen.run_worker(self._decide_marked(action, calls), group="decide")

    async def _decide(self, action: str, call: CallRow, ask: str = "") -> None:
        app = self.screen.app
        if action == "details":  # its decision keys come back here, on the arguments shown
            call = replace(call, args=copy.deepcopy(call.args))  # (the state's row may change)
            picked = await app.push_screen_wait(CallDetailScreen(
                call, self.refusal_here, self.workspace, self.state.output.get))  # fmt: skip
            if picked is None:
                return
            action = picked
        if (refused := self.refusal(call)) is not None:
            self.screen.notify(refused, title="Nothing decided", severity="warning")
            return
        if ask:  # the row changed under the cursor just before: No is the default
            what = f"{call.tool} {one_line(call.args, 50)} on {call.thread_id}"
            if is_pause(call):
                what = f"the pause {one_line(summary(call), 50)} on {call.thread_id}"
            word = WORDS.get(action, action.replace("_", " ").capitalize())
            question = f"{ask} {word} {what}?"
            if not await app.push_screen_wait(ConfirmScreen(question, yes="Go on")):
                return
        decision = await ask_decision(app, action, call, self.bridge.decision_id, self.workspace)
        if decision is None:
            return
        if (refused := self.refusal(call)) is not None:  # decided meanwhile
            self.screen.notify(refused, title="Nothing decided", severity="warning")
            return
        self._send(action, call, decision)

    async def _decide_marked(self, action: str, calls: list[CallRow]) -> None:
        """Approve (or deny, with one reason) every marked call, after one confirmation
        that lists them; each is bound to the arguments its row showed when marked."""
        app = self.screen.app
        open_ = [c for c in calls if self.refusal(c) is None]
        if not open_:
            self.screen.notify("None of the marked calls takes a decision now.",
                               title="Nothing decided", severity="warning")  # fmt: skip
            return
        lines = [f"  {c.tool} {one_line(c.args, 60)} on {c.thread_id}" for c in open_]
        if len(lines) > MARKED_SHOWN:
            lines[MARKED_SHOWN:] = [f"  and {len(lines) - MARKED_SHOWN} more"]
        word = "Approve" if action == "approve" else "Deny"
        skipped = len(calls) - len(open_)
        note = (
            f" ({skipped} marked call{'s' if skipped > 1 else ''} changed or no longer waits: left out.)"
            if skipped
            else ""
        )
        these = "this call" if len(open_) == 1 else f"these {len(open_)} calls"
        question = f"{word} {these}, as shown?{note}"
        listed = Text(visible("\n".join(lines), lines=True))  # text, never markup
        if not await app.push_screen_wait(
            ConfirmScreen(question, listed, yes=f"{word} {len(open_)}")
        ):
            return
        reason = ""
        if action == "cancel":
            answer = await app.push_screen_wait(PromptScreen(
                f"Deny {len(open_)} calls. Reason (optional; the model sees it):", "reason"))  # fmt: skip
            if answer is None:
                return
            reason = answer
        for call in open_:
            if self.refusal(call) is not None:  # decided meanwhile
                continue
            make = self.bridge.decision_id
            decision = (Decision.approve(call.call_id, seen=call.args, id=make())
                        if action == "approve" else Decision.cancel(call.call_id, reason, id=make()))  # fmt: skip
            self._send(action, call, decision)
        self.screen.query_one(DecisionQueue).marked.clear()
        self.redraw_pending()

    def _send(self, action: str, call: CallRow, decision: Decision) -> None:
        self.state.mark_decided(call.call_id, decision.action)  # no second decision from here
        self.redraw_pending()
        self.screen.query_one(DecisionQueue).advance_from(call.call_id)
        self.mine.add(decision.id)
        self.act(action, call.call_id, self._carry(decision))

    def refusal_here(self, call: CallRow) -> str | None:
        """Why `call`, as a detail view shows it, takes no decision now (None: it does)."""
        what = f"{call.tool} {one_line(call.args, 40)} on {call.thread_id}"
        if (live := self.state.pending.get(call.call_id)) is None:
            state = look(self.state.calls.get(call.call_id, call).status)
            return f"{what} is not waiting for a decision ({state.glyph} {state.word})."
        if live.args != call.args:
            return f"The arguments of {call.tool} on {call.thread_id} changed since shown: Esc, then open it again."
        return self.refusal(call)

    def refusal(self, call: CallRow) -> str | None:
        """Why `call` takes no decision now (None: it does)."""
        what = f"{call.tool} {one_line(call.args, 40)} on {call.thread_id}"
        if call.under_review:  # the engine would refuse a decision
            return f"{what} was running when agentdeck stopped: press ! to review it."
        if (live := self.state.pending.get(call.call_id)) is not None and live.args != call.args:
            return f"The arguments of {what} changed since shown: it waits; decide it again."
        if (decided := self.state.decided.get(call.call_id)) is None:
            return None  # (a call decided and applied elsewhere: the runtime says whose won)
        word = {"resume": "approved", "cancel": "cancelled", "fail": "marked failed",
                "rerun": "run again", "step": "stepped"}.get(decided, decided)  # fmt: skip
        return f"{what} is decided ({word}): it applies when the turn is free."

    async def _carry(self, decision: Decision) -> Any:
        try:
            return await self.bridge.api.decide(decision)
        except BaseException:  # not recorded: the call takes a decision again
            self.state.decided.pop(decision.call_id, None)
            self.redraw_pending()
            raise
