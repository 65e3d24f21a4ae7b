"""The fork dialog (`F` on a step, in the live timeline or a turn's steps in history): a new
thread from the record up to that step, optionally with one message or result changed.

It shows what the fork will copy, read through the history reader (its own read-only
connection: `History.fork_preview`, the cut the engine makes): how many entries, and the
last few, each its place, who said it and its text, as text. Enter (or `e`) on a user
message or a tool result edits its text (`EntryEditor`); the other entries cannot be
changed and cannot be picked. The group the new thread runs in is picked from the room's
groups (the step's thread's by default). Ctrl+s forks through the room's client; a
refusal (an entry that cannot be edited, an unknown group, no runtime) is said on the
line above the hint and the dialog stays open. Esc backs out: nothing is made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Select
from textual.widgets.option_list import Option

from console.format import one_line, visible
from console.history.reader import HistoryReader
from console.history.view import ROLE_LABELS
from console.screens.editor import EditorScreen
from console.widgets.text import Label, Static

if TYPE_CHECKING:
    from engine.api.fork_models import ForkBody
    from engine.domain.forks import Forked
    from engine.room import Room

SHOWN = 8  # entries of the fork shown (its last ones)
Fork = Callable[["ForkBody"], Awaitable["Forked"]]


class EntryEditor(EditorScreen[str]):
    """An entry's text in an editor; ctrl+s keeps it for the fork."""

    BINDINGS = [Binding("ctrl+s", "keep", "Keep this text", priority=True)]
    DISCARD = "Discard this edit? The entry keeps its text."

    def __init__(self, seq: int, role: str, text: str) -> None:
        said = "the user message" if role == "user" else "the tool result"
        super().__init__(f"Entry {seq} of the fork: {said}", text,
                         "ctrl+s keep this text · Esc back", "fork-editor")  # fmt: skip

    def action_keep(self) -> None:
        self.dismiss(self.edited_text)


class ForkScreen(ModalScreen["Forked | None"]):
    """Dismissed with the thread made, or None (Esc: nothing is made)."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back out"),
        Binding("ctrl+s", "fork", "Fork", priority=True),
        Binding("e", "edit", "Edit entry"),
    ]
    DEFAULT_CSS = """
    ForkScreen {
        #fork-entries { height: auto; max-height: 12; margin-top: 1; }
        .fork-field { height: auto; margin-top: 1; }
        .fork-field > Label { width: 9; padding-top: 1; }
        .fork-field > Select { width: 1fr; }
        #fork-check { margin-top: 1; text-style: bold; color: $text-error; }
        #fork-editor { height: 14; }
    }
    """

    def __init__(self, room: Room, turn_id: str, step_id: int, thread_id: str, group: str,
                 groups: list[str], save: Fork) -> None:  # fmt: skip
        super().__init__()
        self.turn_id, self.step_id, self.thread_id = turn_id, step_id, thread_id
        self.group, self.groups, self.save = group, groups, save
        self.entries: list[dict[str, Any]] = []  # the last ones the fork copies
        self.upto: int | None = None  # how many it copies (None: not read)
        self.edits: dict[int, str] = {}
        self.reader = HistoryReader(
            room,
            spawn=lambda work, group, exclusive: self.run_worker(
                work, group=group, exclusive=exclusive
            ),
            cancel=lambda group: self.workers.cancel_group(self, group),
            report=lambda text: self._say(text),
        )

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Fork {self.thread_id} at step {self.step_id} (turn {self.turn_id})",
                        id="question")  # fmt: skip
            yield Static("Reading what the fork copies…", id="fork-what")
            yield OptionList(id="fork-entries", markup=False)
            with Horizontal(classes="fork-field"):
                yield Label("group")
                yield Select([(Content(g), g) for g in self.groups], value=self.group,
                             allow_blank=False, id="fork-group")  # fmt: skip
            yield Static("", id="fork-check")
            yield Label("Enter or e: edit the highlighted message or result · ctrl+s fork · "
                        "Esc back", classes="hint")  # fmt: skip

    async def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        if await self.reader.open():
            self.reader.read("preview", self._load)

    async def on_unmount(self) -> None:
        await self.reader.close()

    async def _load(self) -> None:
        history = self.reader.history
        assert history is not None
        preview = await history.fork_preview(self.turn_id, self.step_id, SHOWN)
        self.entries, self.upto = preview["entries"], preview["upto"]
        upto = self.upto
        copied = "no entries" if not upto else \
            f"entries 0–{upto - 1}" if upto > 1 else "entry 0"  # fmt: skip
        last = f"; the last {len(self.entries)}:" if len(self.entries) < upto else ":"
        self.query_one("#fork-what", Static).update(
            f"The new thread copies {copied} of {self.thread_id} and goes on from there{last}"
        )
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(self._option(e) for e in self.entries)
        editable = [i for i, e in enumerate(self.entries) if e["editable"]]
        if editable:
            options.highlighted = editable[-1]

    def _option(self, entry: dict[str, Any]) -> Option:
        seq = entry["seq"]
        text = self.edits.get(seq, entry["text"])
        mark = f"  ✎ edited (was {one_line(entry['text'], 40)})" if seq in self.edits else ""
        calls = f"  → calls {one_line('; '.join(entry['calls']), 200)}" if entry.get("calls") \
            else ""  # fmt: skip
        label = ROLE_LABELS.get(entry["role"], entry["role"])
        line = f"{seq:>4}  {label:<6} {one_line(text, 300)}{calls}{mark}"
        return Option(Content(visible(line)), id=str(seq), disabled=not entry["editable"])

    def _say(self, text: str) -> None:
        self.query_one("#fork-check", Static).update(text)

    @on(OptionList.OptionSelected)
    def entry_chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_edit()

    @work(group="edit", exclusive=True)
    async def action_edit(self) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None or not 0 <= index < len(self.entries):
            self._say("No message or result to edit is highlighted.")
            return
        entry = self.entries[index]
        if not entry["editable"]:
            self._say("Only a user message or a tool result can be edited.")
            return
        seq = entry["seq"]
        text = await self.app.push_screen_wait(
            EntryEditor(seq, entry["role"], self.edits.get(seq, entry["text"]))
        )
        if text is None:
            return
        if text == entry["text"]:
            self.edits.pop(seq, None)
        else:
            self.edits[seq] = text
        options.replace_option_prompt_at_index(index, self._option(entry).prompt)
        self._say("")

    async def action_fork(self) -> None:
        from pydantic import ValidationError

        from engine.api.client import ApiError
        from engine.api.fork_models import ForkBody

        group = self.query_one("#fork-group", Select).value
        try:
            body = ForkBody(turn_id=self.turn_id, step_id=self.step_id,
                            group=group if isinstance(group, str) else None,
                            edits={str(k): v for k, v in self.edits.items()}, by="operator")  # fmt: skip
            made = await self.save(body)
        except ValidationError as exc:
            self._say("; ".join(str(e["msg"]) for e in exc.errors()))
            return
        except (ApiError, RuntimeError) as exc:  # refused, or no runtime reachable now
            self._say(f"Not forked: {exc}")
            return
        self.dismiss(made)
