"""What the operator sends to the runtime from the main screen, carried to its answer.

An action (send, cancel, decide) runs in the screen's workers; its answer or failure is
said to the operator, never raised. A chat message typed while no runtime is reachable is
shown "sending…" and goes, in order, once one is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from console.threads import ChatEntry

if TYPE_CHECKING:
    from console.screens.main import MainScreen


class Outbox:
    """The main screen's actions on their way to the runtime, and the messages held back."""

    def __init__(self, screen: MainScreen, redraw_chat: Callable[[], None]) -> None:
        self.screen, self.redraw_chat = screen, redraw_chat
        self._unsent: list[tuple[str, str, ChatEntry]] = []

    def send(self, thread_id: str, text: str) -> None:
        """Send a chat message now, or hold it (shown "sending…") until a runtime is reached."""
        bridge = self.screen.bridge
        if bridge.client is None:
            entry = ChatEntry("user", text, via="you · sending…")
            self.screen.state.thread(thread_id).append(entry)
            self._unsent.append((thread_id, text, entry))
            self.redraw_chat()
            return
        self.act("send", thread_id, bridge.send(thread_id, text))

    def flush(self) -> None:
        """The runtime is reachable: what was typed before it was goes now, in order (the
        "sending…" notes give way to the messages as the room stores them)."""
        unsent, self._unsent = self._unsent, []
        if not unsent:
            return
        for thread_id, _, entry in unsent:
            self.screen.state.thread(thread_id).discard(entry)
        self.redraw_chat()
        bridge = self.screen.bridge

        async def in_order() -> None:
            for thread_id, text, _ in unsent:
                await self.carry("send", thread_id, bridge.send(thread_id, text))

        self.screen.run_worker(in_order(), group="act")

    def act(self, action: str, target: str, work: Awaitable[Any]) -> None:
        self.screen.run_worker(self.carry(action, target, work), group="act")

    async def carry(self, action: str, target: str, work: Awaitable[Any]) -> None:
        """Await an operator action's answer; say a failure, never crash."""
        from engine.api.models import Decided, Submitted  # loaded with the runtime by now

        screen = self.screen
        try:
            result = await work
        except Exception as exc:  # shown to the operator, never a crash
            screen.notify(f"{action} failed: {exc}", severity="error")
            return
        if isinstance(result, Submitted):
            screen.select_turn(result.turn_id)
            if result.why_queued is not None:  # a busy thread: say so, and why
                screen.notify(f"Queued on {target}: {result.why_queued}. It starts once that "
                              "clears.", title="Message queued")  # fmt: skip
            result = result.turn_id
        elif isinstance(result, Decided):  # a duplicate is said when its event comes
            result = result.status
        screen.post_message(screen.Acted(action, target, result))
