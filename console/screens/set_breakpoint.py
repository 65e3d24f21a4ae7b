"""Set a breakpoint (`B` on a call or a step of the main screen, `a` on the breakpoints
screen): where turns pause for the operator, and for which turns.

The operator picks the kind (before an inference, before a call, after a result), the
tool and the argument pattern (the rules' patterns; from a call, its tool and the
narrowest pattern that matches it, editable) and the scope (once, this thread, a group,
the room: a thread by default). A line under the fields says, as they are typed, what the
breakpoint will pause at, or why it cannot be set, and whether it matches the call it was
opened from. Ctrl+s (or Enter in a field) sets it through the room's client; the room
may still refuse it (an unknown tool or group), said on that line, the dialog open. Esc
backs out: nothing is set.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, RadioButton, RadioSet

from console.breaking import BreakAt, Origin, origin_of
from console.format import facts, one_line
from console.widgets.breakpoints_table import reach, where
from console.widgets.inputs import OneLineInput
from console.widgets.text import Label, Static
from engine.domain.breakpoints import KINDS, SCOPES, Breakpoint
from engine.domain.rules import narrowest

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.bridge import Bridge
    from engine.api.break_models import NewBreakpoint

KIND_WORDS = ("before an inference", "before a call", "after a result")
SCOPE_WORDS = ("once", "this thread", "a group", "the room")
Save = Callable[["NewBreakpoint"], Awaitable[Breakpoint]]


class SetBreakpointScreen(ModalScreen[Breakpoint | None]):
    """Dismissed with the breakpoint set, or None (Esc: nothing is set)."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back out"),
        Binding("ctrl+s", "set", "Set breakpoint", priority=True),
    ]

    def __init__(self, origin: Origin, save: Save, workspace: Path | None = None) -> None:
        super().__init__()
        self.origin, self.save, self.workspace = origin, save, workspace
        self.ok = False
        self.line = ""  # what the check line says now

    def compose(self) -> ComposeResult:
        o = self.origin
        with Vertical(id="dialog", classes="wide"):
            yield Label("Set a breakpoint: turns pause there, in the decision queue, for you "
                        "to continue, step, edit or cancel", id="question")  # fmt: skip
            if o.call:
                yield Static(facts((("from the call", f"{o.tool} {one_line(o.args, 300)}"),
                                    ("thread", o.thread_id))))  # fmt: skip
            with Horizontal(classes="bp-field"):
                yield Label("pause")
                yield _choice("bp-kind", KIND_WORDS, KINDS.index(o.kind))  # type: ignore[arg-type]
            with Horizontal(classes="bp-field"):
                yield Label("tool")
                yield OneLineInput(o.tool, placeholder="any tool", id="bp-tool", compact=True)
            with Horizontal(classes="bp-field"):
                yield Label("pattern")
                pattern = narrowest(o.tool, o.args) if o.call else ""
                yield OneLineInput(pattern, placeholder="any arguments", id="bp-pattern",
                                   select_on_focus=False, compact=True)  # fmt: skip
            with Horizontal(classes="bp-field"):
                yield Label("for")
                yield _choice("bp-scope", SCOPE_WORDS, SCOPES.index("thread"))
            with Horizontal(classes="bp-field"):
                yield Label("thread")
                yield OneLineInput(o.thread_id, placeholder="any thread (once only)",
                                   id="bp-thread", compact=True)  # fmt: skip
            with Horizontal(classes="bp-field"):
                yield Label("group")
                yield OneLineInput(o.group or "chat", id="bp-group", compact=True)
            yield Static(id="bp-check")
            yield Static("The pattern is a rule's: a shell command glob (`git push*`), a path "
                         "glob, a URL prefix, or the exact arguments as JSON.", classes="hint")  # fmt: skip
            yield Static("ctrl+s (or Enter in a field) sets it · Esc backs out · tab: the next "
                         "field · arrows and space: choose", classes="hint")  # fmt: skip

    def on_mount(self) -> None:
        self._check()
        self.query_one("#bp-pattern" if self.origin.call else "#bp-kind").focus()

    # -- what is typed ----------------------------------------------------------------------

    def typed(self) -> dict[str, Any]:
        """The breakpoint as the fields say (the fields a kind or scope has no use for
        are left out)."""
        kind = KINDS[max(0, self.query_one("#bp-kind", RadioSet).pressed_index)]
        scope = SCOPES[max(0, self.query_one("#bp-scope", RadioSet).pressed_index)]
        tool = self.query_one("#bp-tool", Input).value.strip() or None
        pattern = self.query_one("#bp-pattern", Input).value
        thread = self.query_one("#bp-thread", Input).value.strip() or None
        group = self.query_one("#bp-group", Input).value.strip() or None
        return {"kind": kind, "scope": scope,
                "tool": tool if kind != "inference" else None,
                "pattern": pattern if kind != "inference" and pattern.strip() else None,
                "thread_id": thread if scope in ("once", "thread") else None,
                "group": group if scope == "group" else None}  # fmt: skip

    def _check(self) -> Breakpoint | None:
        """Say what the breakpoint typed pauses at, or why it cannot be set; the fields a
        kind or scope has no use for are disabled."""
        fields = self.typed()
        self.query_one("#bp-tool").disabled = fields["kind"] == "inference"
        self.query_one("#bp-pattern").disabled = fields["kind"] == "inference"
        self.query_one("#bp-thread").disabled = fields["scope"] not in ("once", "thread")
        self.query_one("#bp-group").disabled = fields["scope"] != "group"
        point: Breakpoint | None = None
        try:
            point = Breakpoint(**fields)
        except ValidationError as exc:
            line = "✗ " + "; ".join(str(e["msg"]).removeprefix("Value error, ")
                                    for e in exc.errors())  # fmt: skip
        else:
            line = f"✓ pauses {point.where()}"
            o = self.origin
            if o.call and point.kind != "inference":
                line += (": it matches this call" if point.matches(o.tool, o.args, self.workspace)
                         else ". ⚠ It does not match the call it was opened from")  # fmt: skip
        self.ok = point is not None
        self._say(line)
        return point

    def _say(self, line: str) -> None:
        self.line = line
        check = self.query_one("#bp-check", Static)
        check.update(Text(line))
        check.set_class(line.startswith("✗"), "-refused")

    @on(Input.Changed)
    @on(RadioSet.Changed)
    def changed(self, event: Input.Changed | RadioSet.Changed) -> None:
        event.stop()
        self._check()

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_set()

    # -- setting it -------------------------------------------------------------------------

    @work(exclusive=True, group="set")
    async def action_set(self) -> None:
        if self._check() is None:
            self.notify(f"Nothing set: {self.line.removeprefix('✗ ')}", title="Breakpoint",
                        severity="warning")  # fmt: skip
            return
        from engine.api.break_models import NewBreakpoint  # (loaded when one is set)

        try:
            body = NewBreakpoint(made_by="operator", **self.typed())
            point = await self.save(body)
        except ValidationError as exc:
            self._say("✗ " + "; ".join(str(e["msg"]) for e in exc.errors()))
            return
        except Exception as exc:  # the room refused it (Invalid), or is gone: said here
            self._say(f"✗ not set: {exc}")
            return
        self.dismiss(point)


class _Option(RadioButton):
    """A radio button whose state is a glyph too (● chosen, ○ not), never colour alone."""

    @property
    def _button(self) -> Content:
        self.BUTTON_INNER = "●" if self.value else "○"
        return super()._button


class _Choice(RadioSet):
    """A RadioSet whose highlight starts on the button pressed (Textual's starts on the
    first, so the first arrow key moved away from the choice the dialog proposed)."""

    def on_mount(self) -> None:
        self.call_after_refresh(self._on_pressed)  # (after RadioSet's own mount handler)

    def _on_pressed(self) -> None:
        self._selected = max(0, self.pressed_index)


def _choice(ident: str, words: tuple[str, ...], pressed: int) -> RadioSet:
    return _Choice(*(_Option(w, value=i == pressed) for i, w in enumerate(words)),
                   id=ident, compact=True)  # fmt: skip


async def set_breakpoint(screen: Screen[Any], bridge: Bridge, origin: Origin,
                         workspace: Path | None) -> Breakpoint | None:  # fmt: skip
    """Open the dialog on `origin` over `screen`; the breakpoint set (said), or None."""
    if bridge.client is None:
        screen.notify("No runtime is reachable now: nothing set.", title="Breakpoint",
                      severity="warning")  # fmt: skip
        return None
    point = await screen.app.push_screen_wait(
        SetBreakpointScreen(origin, bridge.client.add_breakpoint, workspace)
    )
    if point is not None:
        screen.notify(f"Breakpoint {point.id} set: {where(point)}, {reach(point)}. Its pauses "
                      "wait in the decision queue.", title="Breakpoints")  # fmt: skip
    return point


async def break_here(screen: Screen[Any], bridge: Bridge, ask: BreakAt) -> None:
    """`B` on a call or a step: the dialog, proposing a breakpoint from there."""
    origin = origin_of(bridge.state, ask)
    if isinstance(origin, str):
        screen.notify(origin, title="Breakpoint", severity="warning")
        return
    room = getattr(screen.app, "room", None)
    await set_breakpoint(screen, bridge, origin, room.workspace if room is not None else None)
