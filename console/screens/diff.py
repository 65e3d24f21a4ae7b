"""The diff screen: two turns side by side (a replay and its original, or any two).

A header per side (A on the left, B on the right): the turn, its thread and group, model,
strategy, outcome, start and time, tokens, cost, steps, what it was asked and answered; a
fact that differs from the other side's is marked `~` in the theme's colour. Below, the
rows of both turns aligned (`DiffView`: `=` the same, `~` changed, `<` only in A, `>` only
in B): j/k or the arrows move both sides together, n/p the next or previous difference,
Enter shows the row's two sides whole, Esc or q closes the screen.

It reads both turns through its own history reader (console/history/reader.py: a
read-only connection, so it works while another process owns the room, and with no
runtime at all) and compares them with engine/domain/turn_diff.py. It is opened from the
history screen (`m` marks a turn, `d` on another diffs the two: `TurnPair`) and from the
command palette ("Diff two turns…", which asks for their ids: `ask_for_turns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen

from console.format import duration, facts, set_title, visible
from console.glyphs import look
from console.history.reader import HistoryReader
from console.history.view import stamp
from console.screens.diff_row import DiffRowScreen
from console.screens.prompt import PromptScreen
from console.widgets.diff_view import DiffView
from console.widgets.key_bar import KeyBar
from console.widgets.text import Static
from engine.domain.turn_diff import Side, TurnDiff
from engine.room import Room

if TYPE_CHECKING:
    from textual.app import App

# The facts a side lists, and the facts of `TurnDiff.facts_changed` each one says.
FACTS = (("thread", ("group",)), ("model", ("model",)), ("strategy", ("strategy",)),
         ("outcome", ("status", "reason")), ("started", ()), ("time", ()),
         ("tokens", ("input_tokens", "output_tokens", "cached_tokens")),
         ("cost", ("cost", "unpriced")), ("steps", ("steps", "rounds", "calls")),
         ("asked", ("text",)), ("answer", ("answer",)))  # fmt: skip
COUNTED = {"same": "same", "changed": "changed", "only_a": "only in A", "only_b": "only in B"}
ONE_LINE = 200  # characters of the asked text and the answer a header shows


def fact(side: Side, name: str) -> str | Text:
    """One fact of a side, as the header says it."""
    if name == "thread":
        return f"{side.thread_id} · group {side.group or '?'} · from {side.origin or '?'}"
    if name == "outcome":
        state = look(side.status, side.reason)
        return Text(f"{state.glyph} {side.status}" + (f"/{side.reason}" if side.reason else ""))
    if name == "started":
        return stamp(side.started_at)
    if name == "time":
        return duration(side.duration) if side.duration is not None else "not ended"
    if name == "tokens":
        cached = f" · {side.cached_tokens} cached" if side.cached_tokens else ""
        return f"{side.input_tokens} in · {side.output_tokens} out{cached}"
    if name == "cost":
        return side.spent
    if name == "steps":
        return f"{side.steps} · {side.rounds} inferences · {side.calls} calls"
    value = getattr(side, name if name != "asked" else "text")
    return " ".join(str(value or "—").split())[:ONE_LINE]


def changed_facts(diff: TurnDiff) -> set[str]:
    """The header's facts that differ between the sides."""
    differ = set(diff.facts_changed)
    differ |= {n for n in ("text", "answer") if getattr(diff.a, n) != getattr(diff.b, n)}
    return {name for name, said in FACTS if differ & set(said)}


class DiffScreen(Screen[None]):
    """Turn A and turn B side by side; Esc or q closes it."""

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("ctrl+r", "reload", "Read again", show=False),
    ]
    DEFAULT_CSS = """
    DiffScreen {
        #diff-sides { height: auto; max-height: 50%; }
        .diff-side { width: 1fr; height: auto; padding: 0 1; }
        #diff-rows-pane { height: 1fr; }
    }
    """

    class Shown(Message):
        """The diff was read and drawn."""

        def __init__(self, diff: TurnDiff) -> None:
            super().__init__()
            self.diff = diff

    def __init__(self, room: Room, turn_a: str, turn_b: str) -> None:
        super().__init__()
        self.room, self.turn_a, self.turn_b = room, turn_a, turn_b
        self.diff: TurnDiff | None = None
        self.reader = HistoryReader(
            room,
            spawn=lambda work, group, exclusive: self.run_worker(
                work, group=group, exclusive=exclusive
            ),
            cancel=lambda group: self.workers.cancel_group(self, group),
            report=self._failed,
        )

    def compose(self) -> ComposeResult:
        with Horizontal(id="diff-sides"):
            for side in ("a", "b"):
                with Vertical(id=f"diff-{side}-pane", classes="pane diff-side"):
                    yield Static(id=f"diff-{side}")
        with Vertical(id="diff-rows-pane", classes="pane"):
            yield DiffView(id="diff-rows")
        yield KeyBar()

    async def on_mount(self) -> None:
        set_title(self.query_one("#diff-a-pane"), f"A · {self.turn_a}")
        set_title(self.query_one("#diff-b-pane"), f"B · {self.turn_b}")
        set_title(self.query_one("#diff-rows-pane"), "Rows")
        self.query_one(DiffView).focus()
        if await self.reader.open():  # a read-only open takes ms
            self.reader.read("diff", self._load)

    async def on_unmount(self) -> None:
        await self.reader.close()

    async def _load(self) -> None:
        diff = await self.reader.diff(self.turn_a, self.turn_b)
        self.diff = diff
        view = self.query_one(DiffView)
        differ = changed_facts(diff)
        mark = view.get_component_rich_style("diff--changed")
        for side, facts_of in (("a", diff.a), ("b", diff.b)):
            self.query_one(f"#diff-{side}", Static).update(self._facts(facts_of, differ, mark))
        counts = diff.counts()
        said = " · ".join(f"{counts[m]} {COUNTED[m]}" for m in COUNTED)
        set_title(self.query_one("#diff-rows-pane"), f"Rows · {said}")
        view.show(diff.rows)
        self.post_message(self.Shown(diff))

    @staticmethod
    def _facts(side: Side, differ: set[str], mark: Style) -> Any:
        rows = []
        for name, _ in FACTS:
            value = fact(side, name)
            shown = value if isinstance(value, Text) else Text(visible(value))
            if name in differ:  # a glyph and the theme's colour: never colour alone
                shown = Text("~ ", style=mark) + shown
                shown.stylize(mark)
            rows.append((name, shown))
        return facts(rows)

    def _failed(self, text: str) -> None:
        self.notify(text, severity="error", title="Diff")
        self.query_one(DiffView).show([], text)

    @on(DiffView.Highlighted)
    def row_highlighted(self, event: DiffView.Highlighted) -> None:
        row = self.query_one(DiffView).current
        self.query_one("#diff-rows-pane").border_subtitle = (
            Text(visible(row.what_changed())) if row is not None else ""
        )

    @on(DiffView.Chosen)
    def row_chosen(self, event: DiffView.Chosen) -> None:
        row = self.query_one(DiffView).current
        if row is not None:
            self.app.push_screen(DiffRowScreen(row, self.turn_a, self.turn_b))

    def action_reload(self) -> None:
        self.reader.read("diff", self._load)

    def action_close(self) -> None:
        self.dismiss(None)


class TurnPair:
    """The turn the history screen marked (`m`) to diff another one with (`d`)."""

    def __init__(self) -> None:
        self.marked: str | None = None

    def act(self, screen: Screen[Any], what: str, turn_id: str | None, room: Room) -> None:
        """`mark` the turn (again: unmark it), or `diff` the marked turn (A) with it (B)."""
        if turn_id is None:
            screen.notify("Select a turn first.", severity="warning")
            return
        if what == "mark":
            self.marked = None if self.marked == turn_id else turn_id
            said = "marked: d on another turn diffs the two" if self.marked else "unmarked"
            screen.notify(f"Turn {turn_id} {said}.", title="Diff")
            return
        if self.marked is None or self.marked == turn_id:
            screen.notify("Mark a turn with m, then press d on another one to diff the two.",
                          severity="warning", title="Diff")  # fmt: skip
            return
        screen.app.push_screen(DiffScreen(room, self.marked, turn_id))


def ask_for_turns(app: App[Any], room: Room) -> None:
    """Ask for two turn ids (the palette's "Diff two turns…") and diff them."""

    def answered(answer: str | None) -> None:
        ids = (answer or "").split()
        if answer is None or not ids:
            return
        if len(ids) != 2:
            app.notify("Two turn ids, A then B, with a space between.", severity="warning")
            return
        app.push_screen(DiffScreen(room, ids[0], ids[1]))

    app.push_screen(PromptScreen("Diff two turns: TURN_A TURN_B (their ids, as history "
                                 "shows them)", "t12 t15"), answered)  # fmt: skip
