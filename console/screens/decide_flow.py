"""How the main screen takes a decision: the key's question (engine-side refusals said
first, a guard's question when the key may not have been meant for the queue), the
decision made from the answer, and its way to the runtime; the detail view's keys come
back through the same path, on the arguments it showed (a mixin of MainScreen)."""

from __future__ import annotations

import copy
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual import work

from console.format import one_line
from console.glyphs import look
from console.screens.call_detail import CallDetailScreen
from console.screens.confirm import ConfirmScreen
from console.screens.deciding import ask_decision
from console.state import CallRow, DeckState

if TYPE_CHECKING:
    from textual.app import App

    from console.bridge import Bridge


class Deciding:
    """The decision half of MainScreen (`self` is the screen)."""

    if TYPE_CHECKING:
        app: App[object]
        bridge: Bridge
        state: DeckState
        _mine: set[str]

        def notify(self, message: str, *, title: str = ..., severity: Any = ...) -> None: ...
        def _redraw_pending(self) -> None: ...
        def _act(self, action: str, target: str, work: Awaitable[Any]) -> None: ...

    @work(group="decide")
    async def _decide(self, action: str, call: CallRow, ask: str = "") -> None:
        if action == "details":  # its decision keys come back here, on the arguments shown
            call = replace(call, args=copy.deepcopy(call.args))  # (the state's row may change)
            room = getattr(self.app, "room", None)
            picked = await self.app.push_screen_wait(CallDetailScreen(
                call, self._refusal_here, room.workspace if room is not None else None))  # fmt: skip
            if picked is None:
                return
            action = picked
        if (refused := self._refusal(call)) is not None:
            self.notify(refused, title="Nothing decided", severity="warning")
            return
        if ask:  # the key may not have been meant for the queue: No is the default
            what = f"{call.tool} {one_line(call.args, 50)} on {call.thread_id}"
            question = f"{ask} {action.replace('_', ' ').capitalize()} {what}?"
            if not await self.app.push_screen_wait(ConfirmScreen(question, yes="Go on")):
                return
        decision = await ask_decision(self.app, action, call, self.bridge.decision_id)
        if decision is None:
            return
        if (refused := self._refusal(call)) is not None:  # decided meanwhile
            self.notify(refused, title="Nothing decided", severity="warning")
            return
        self.state.mark_decided(call.call_id, decision.action)  # no second decision from here
        self._redraw_pending()
        self._mine.add(decision.id)
        self._act(action, call.call_id, self._send_decision(decision))

    def _refusal_here(self, call: CallRow) -> str | None:
        """Why `call`, as a detail view shows it, takes no decision now (None: it does)."""
        what = f"{call.tool} {one_line(call.args, 40)} on {call.thread_id}"
        if (live := self.state.pending.get(call.call_id)) is None:
            state = look(self.state.calls.get(call.call_id, call).status)
            return f"{what} is not waiting for a decision ({state.glyph} {state.word})."
        if live.args != call.args:
            return f"The arguments of {call.tool} on {call.thread_id} changed since shown: Esc, then open it again."
        return self._refusal(call)

    def _refusal(self, call: CallRow) -> str | None:
        """Why `call` takes no decision now (None: it does)."""
        what = f"{call.tool} {one_line(call.args, 40)} on {call.thread_id}"
        if call.under_review:  # the engine would refuse a decision
            return f"{what} was running when agentdeck stopped: press ! to review it."
        if (decided := self.state.decided.get(call.call_id)) is None:
            return None  # (a call decided and applied elsewhere: the runtime says whose won)
        word = {"resume": "approved", "cancel": "cancelled", "fail": "marked failed",
                "rerun": "run again"}.get(decided, decided)  # fmt: skip
        return f"{what} is decided ({word}): it applies when the turn is free."

    async def _send_decision(self, decision: Any) -> Any:
        try:
            return await self.bridge.api.decide(decision)
        except BaseException:  # not recorded: the call takes a decision again
            self.state.decided.pop(decision.call_id, None)
            self._redraw_pending()
            raise
