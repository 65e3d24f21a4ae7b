"""What runs, on the main screen: the spinner and its time (in the chat with the running
command's last lines, the calls pane and the status bar), and stopping it: `c`, which asks,
and the second Esc that stops the chat's turn.

The spinner is drawn FPS times a second from the console's clock while a turn runs, and
not at all otherwise. Esc in the chat while its thread's turn runs leaves the chat and
arms a stop: the very next key, if it is Esc and comes within STOP_ARMED seconds, cancels
the turn without a question (the first Esc's footer word said so, as Claude Code's and
Codex's Esc do); any other key first disarms it, so Esc, a dialog, Esc stops nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.timer import Timer

from console.screens.confirm import ConfirmScreen
from console.spinner import FPS, room_activity, thread_activity, thread_output
from console.widgets.calls_table import CallsTable
from console.widgets.chat_log import ChatLog
from console.widgets.status_bar import StatusBar
from engine.lifecycle import TurnStatus

if TYPE_CHECKING:
    from console.screens.main import MainScreen

STOP_ARMED = 2.0  # seconds a second Esc stops the turn after the first left the chat
OUTPUT_LINES = 8  # lines of a running call's output under its spinner (fewer in a short chat)


class Running:
    """The main screen's spinner, and its armed Esc."""

    def __init__(self, screen: MainScreen) -> None:
        self.screen = screen
        self.spinning, self.frame = False, 0
        self._armed: tuple[str, int] | None = None  # (thread, the arming Esc's key count)
        self._disarming: Timer | None = None

    def spin(self) -> None:
        """While a turn runs: the spinner and its time, in the chat (with what the running
        call printed last), the calls pane and the status bar."""
        screen, state = self.screen, self.screen.state
        running = state.counts()[0] > 0
        if not running and not self.spinning:
            return
        now = screen.clock()
        self.spinning, self.frame = running, int(now * FPS)  # (the clock's: a test's fixed
        frame = self.frame  # clock draws the same frame every time)
        screen.query_one(StatusBar).activity = room_activity(state, now, frame)
        log = screen.query_one(ChatLog)
        lines = min(OUTPUT_LINES, max(2, log.size.height // 3))
        log.show_activity(thread_activity(state, screen.thread_id, now, frame),
                          thread_output(state, screen.thread_id, lines))  # fmt: skip
        turn = screen.selected_turn
        screen.query_one(CallsTable).show(turn, state.calls_of(turn), now, frame)

    # -- c, and Esc Esc ---------------------------------------------------------------------------

    def cancel_target(self) -> str | None:
        """The turn `c` cancels: the selected one if unfinished, else the thread's active one."""
        screen = self.screen
        turn = screen.state.turns.get(screen.selected_turn)
        if turn is not None and turn.status != TurnStatus.DONE:
            return turn.turn_id
        active = screen.state.active_turn(screen.thread_id)
        return active.turn_id if active else None

    async def ask_cancel(self) -> None:
        """`c`: cancel that turn once the operator says so."""
        screen, turn_id = self.screen, self.cancel_target()
        if turn_id is None:
            screen.notify("No running or waiting turn is selected.", severity="warning")
            return
        turn = screen.state.turns[turn_id]
        ok = await screen.app.push_screen_wait(ConfirmScreen(
            f"Cancel turn {turn_id} on {turn.thread_id}? It ends done/cancelled.",
            yes="Cancel turn", no="Keep running"))  # fmt: skip
        if ok:
            screen.outbox.act("cancel_turn", turn_id, screen.bridge.cancel_turn(turn_id))

    def arm(self, thread_id: str) -> None:
        self._armed = (thread_id, self._keys())
        self.screen.refresh_bindings()
        if self._disarming is not None:
            self._disarming.stop()
        self._disarming = self.screen.set_timer(STOP_ARMED, self.disarm, name="stop armed")

    def armed(self) -> bool:
        """Whether this key (or, for the footer, the next) is the one after the arming Esc."""
        return self._armed is not None and self._keys() <= self._armed[1] + 1

    def key_pressed(self, count: int) -> None:
        """The app counted a key: past the one after the arming Esc, the stop is off."""
        if self._armed is not None and count > self._armed[1] + 1:
            self.disarm()

    def disarm(self) -> None:
        self._armed = None
        self.screen.refresh_bindings()

    def stop(self) -> None:
        """The second Esc: the thread's turn is cancelled now, without a question."""
        if self._armed is None:
            return
        thread_id = self._armed[0]
        self.disarm()
        screen = self.screen
        turn = screen.state.active_turn(thread_id)
        if turn is not None:
            screen.outbox.act("cancel_turn", turn.turn_id,
                               screen.bridge.cancel_turn(turn.turn_id))  # fmt: skip

    def _keys(self) -> int:
        return int(getattr(self.screen.app, "keys_pressed", 0))
