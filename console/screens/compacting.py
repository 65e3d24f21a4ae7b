"""An operator's compaction of the chat's thread now, or the undoing of its last one: asked
first, then a turn of its own on the thread (engine/strategies/compact.py), which the
timeline shows as a `compaction` step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from console.screens.main import MainScreen

ASK = ("Compact {thread} now? The model summarises its older part; its next turns read the "
       "summary and the newest messages (history keeps them all; this can be undone).")  # fmt: skip
ASK_UNDO = "Undo the last compaction of {thread}? Its next turns read the whole conversation."


async def compact(screen: MainScreen, undo: bool) -> None:
    thread = screen.thread_id
    question = (ASK_UNDO if undo else ASK).format(thread=thread)
    yes = "Undo compaction" if undo else "Compact"
    if await screen.app.push_screen_wait(ConfirmScreen(question, yes=yes, no="Keep as it is")):
        what = "uncompact" if undo else "compact"
        screen.outbox.act(what, thread, screen.bridge.compact(thread, undo))
