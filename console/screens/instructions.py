"""What the agent is told on one thread: the instructions a new turn there gets, part by
part, from the most general (the room's AGENTS.md) to the thread's own, which `e` edits.

The parts come from several places (a file, agentdeck.toml, an operator), and a wrong
answer is often a wrong instruction: this view shows each with where it comes from, and
the hash the thread's next turn will record, so it can be found again in the history. It
reads them through the bridge, hosted or attached alike, when it opens and again after an
edit; it shows what a new turn is told now (what an earlier turn was told is in the
history's turn detail). Every part is drawn as text: a file or a person wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget

from console.bridge import Bridge
from console.format import facts, plain
from console.screens.editor import EditorScreen
from console.widgets.text import Label, Static

if TYPE_CHECKING:
    from engine.api.models import ThreadInstructions


class InstructionsEditor(EditorScreen[str]):
    """The thread's own instructions in an editor; ctrl+s saves them (left empty: none)."""

    BINDINGS = [Binding("ctrl+s", "save", "Save", priority=True)]
    DISCARD = "Discard the edits? The thread's instructions stay as they were."
    DEFAULT_CSS = """
    #instructions-editor { height: 20; }
    """

    def __init__(self, thread_id: str, text: str) -> None:
        super().__init__(f"Instructions of {thread_id}: its own part, told after the others",
                         text, "ctrl+s save (empty: none of its own) · Esc back without saving",
                         "instructions-editor")  # fmt: skip

    def action_save(self) -> None:
        self.dismiss(self.edited_text)


class InstructionsScreen(ModalScreen[None]):
    """Opened by `I` (or the palette's "Instructions") on the thread the chat shows."""

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("e", "edit", "Edit the thread's own"),
    ]

    class Saved(Message):
        """The thread's own instructions were set; `told` is what its next turn is told."""

        def __init__(self, thread_id: str, told: ThreadInstructions) -> None:
            super().__init__()
            self.thread_id, self.told = thread_id, told

    def __init__(self, bridge: Bridge, thread_id: str) -> None:
        super().__init__()
        self.bridge, self.thread_id = bridge, thread_id
        self.told: ThreadInstructions | None = None  # as last read
        self.loaded = 0  # how many times they were read and drawn (tests look)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Instructions · {self.thread_id}", id="question")
            with VerticalScroll(id="dialog-body"):
                yield Static("reading the instructions…", classes="hint")
            yield Label("Told in this order: where they disagree, the later win · e edits "
                        "its own · Esc closes", classes="hint")  # fmt: skip

    def on_mount(self) -> None:
        self.query_one("#dialog-body").focus()  # the arrows and pages scroll the parts
        # (the coroutine is made when the worker runs: Textual types it as returning Never)
        self.run_worker(self._read, group="read", exclusive=True)  # type: ignore[arg-type]

    async def _read(self) -> None:
        try:
            told = await self.bridge.instructions(self.thread_id)
        except Exception as exc:  # no runtime, an owner gone: said on the screen, not raised
            await self._draw([Static(plain(f"The instructions cannot be read now: {exc}"))])
            return
        await self.show(told)

    async def show(self, told: ThreadInstructions) -> None:
        """Draw `told`: each part under its source, then the facts."""
        self.told = told
        own = bool(told.own and told.own.strip())  # then the last part is the thread's own
        drawn: list[Widget] = []
        for n, part in enumerate(told.parts):
            mine = own and n == len(told.parts) - 1
            drawn += [Label(part.source + (" · its own (e edits it)" if mine else ""),
                            classes="section"),
                      Static(plain(part.text, lines=True), classes="instructions-part")]  # fmt: skip
        if not told.parts:
            drawn.append(Static(f"None: a new turn on {self.thread_id} is told nothing (no "
                                "AGENTS.md, no [agent] or group instructions, none of its "
                                "own).", classes="instructions-part"))  # fmt: skip
        if not own:
            drawn += [Label(f"the thread {self.thread_id} · its own", classes="section"),
                      Static("none: e writes them", classes="hint")]  # fmt: skip
        drawn += [Label("details", classes="section"),
                  Static(facts((("group", told.group), ("hash", told.hash or "none"),
                                ("sent", f"{len(told.text):,} characters, as the system "
                                 "prompt"))), id="instructions-facts")]  # fmt: skip
        await self._draw(drawn)
        self.loaded += 1

    async def _draw(self, widgets: list[Widget]) -> None:
        body = self.query_one("#dialog-body")
        await body.remove_children()
        await body.mount_all(widgets)

    def action_close(self) -> None:
        self.dismiss(None)

    @work(group="edit", exclusive=True)
    async def action_edit(self) -> None:
        """Edit the thread's own part; ctrl+s sets it through the bridge and the view shows
        what the next turn is told."""
        if self.told is None:
            self.notify("The instructions are not read yet.", severity="warning")
            return
        before = self.told.own or ""
        text = await self.app.push_screen_wait(InstructionsEditor(self.thread_id, before))
        if text is None:
            return
        if text.strip() == before.strip():
            self.notify("Nothing changed.", title="Instructions")
            return
        try:
            own = text if text.strip() else None  # all blank: none of its own
            told = await self.bridge.set_instructions(self.thread_id, own)
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Setting the instructions of {self.thread_id} failed: {exc}",
                        severity="error")  # fmt: skip
            return
        await self.show(told)
        self.notify(f"The own instructions of {self.thread_id} are set: its next turn is told "
                    "them." if text.strip() else f"The own instructions of {self.thread_id} "
                    "are cleared: its next turn is told the others.", title="Instructions")  # fmt: skip
        self.post_message(self.Saved(self.thread_id, told))
