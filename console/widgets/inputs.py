"""Inputs that keep a paste whole: Textual's Input keeps only a paste's first line."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from textual import events
from textual.message import Message
from textual.widgets import Input

# Every line break str.splitlines knows: terminals paste \r, Word's soft break is \v.
LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
LINE_BREAKS = re.compile("\n+")


class OneLineInput(Input):
    """A paste of several lines is kept whole, on one line (for a reason, a filter)."""

    def _on_paste(self, event: events.Paste) -> None:
        # Breaks at the ends dropped, each run of them inside a space (the paste's own spaces
        # kept); what is left, Input's own handler (next in the MRO) types in.
        event.text = LINE_BREAKS.sub(" ", LINE_BREAK.sub("\n", event.text).strip("\n"))


class ChatInput(Input):
    """The chat's input: a paste of several lines asks for the editor (`SeveralLines`),
    where the message keeps its lines. It knows when a key was last typed in it
    (`typed_at`), so a decision card does not take the keyboard from a typing operator."""

    keys_clock: Callable[[], float] = staticmethod(time.monotonic)
    typed_at = float("-inf")

    async def _on_key(self, event: events.Key) -> None:
        self.typed_at = self.keys_clock()
        await super()._on_key(event)

    class SeveralLines(Message):
        """A paste of several lines: `text` is the input's text with the paste put in, a
        message to write in the editor."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def _on_paste(self, event: events.Paste) -> None:
        text = LINE_BREAK.sub("\n", event.text)
        if "\n" not in text.strip("\n"):
            event.text = text.strip("\n")  # one line (the breaks around it dropped): Input's
            return  # own handler, next in the MRO, types it in
        event.prevent_default()
        event.stop()
        start, end = sorted(self.selection)  # a selection is replaced, as one line's is
        self.post_message(self.SeveralLines(self.value[:start] + text + self.value[end:]))
