"""The decision card: the call waiting in the thread the chat shows, under its messages,
decided from there with one key.

It shows the tool, its arguments whole as people read them (console/call_args.py: a
`shell` command wrapped and highlighted, a `write_file` as a diff, other tools as indented
JSON), why it waits and its deadline, and what the operator must know of the tool before
approving (console/tool_facts.py): for a shell call the sandbox it will run in (a warning
where there is none), for an MCP server's tool which server and whether it is read-only or
idempotent. Its keys are the decision queue's: `a` approve once, `A` approve and remember,
`x` deny with a reason, `e` edit then approve, `u` use a result, Enter the details; for a
shell call in a sandbox, `O` approves it to run outside the sandbox and `N` with the
network (said in the failure and warning colours; this call only, never remembered). A
breakpoint's pause (console/pause.py) shows where it paused and what it holds, and takes
`a` continue, `n` step, `e` edit then continue, `x` end the turn (it asks first). Tab
goes back to the chat's input, Esc leaves the chat for the panes (as from the input); the
screen's own keys (`d` the queue, `?` help) act as from any pane, and any other letter goes
to the input, as the start of a message.

No keystroke meant for the chat decides a call. The card takes the keyboard by itself only
when the operator has not typed for QUIET seconds, and its keys act only once it has
visibly held the keyboard for ARM seconds (its key line appears then); a key typed before
that goes to the input, with the focus, as the operator meant it. Tab, a key that never
types text, brings the keyboard to the card with its keys armed at once. Enter never
approves. When the call shown changes by itself (a new one arrives, another console
decides), the card is disarmed for ARM seconds again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from console.call_args import shown_args
from console.deadlines import time_left
from console.format import age, clock_time, set_title, visible
from console.pause import headline, is_pause, offered
from console.pause import sections as pause_sections
from console.state import CallRow
from console.tool_facts import SANDBOX_ACTIONS, ToolFacts
from console.widgets.text import Static

ARM = 0.5  # seconds the card holds the keyboard, visibly, before its keys act
QUIET = 1.0  # seconds without typing in the input before the card takes the keyboard itself
KEYS_LINE = (
    "a approve · A approve+remember · x deny · e edit · u use a result · ⏎ details · tab chat"
)
NARROW_KEYS = "a approve · A remember · x deny · e edit · u use · ⏎ details"
# A shell call's keys beside approve, where a sandbox confines it: (wide, narrow) words;
# narrow, O has a line of its own and N is left to the help (the lines are the command's)
OUTSIDE_KEY = ("O outside the sandbox", "O outside the sandbox")
NETWORK_KEY = ("N with the network", "")
NARROW = 56  # cells of width under which the keys are said in short
AWAY_LINE = "tab: decide here (a approve · A approve+remember · x deny · e edit · u use a result)"
WAIT_LINE = "keys in a moment: what you type now goes to the chat"
REVIEW_LINE = "was running when agentdeck stopped: ! reviews it · tab chat"
PAUSE_KEYS = "a continue · n step · e edit+continue · x end the turn · ⏎ details · tab chat"
NARROW_PAUSE_KEYS = "a continue · n step · e edit · x end turn · ⏎"
PAUSE_AWAY = "tab: decide here (a continue · n step · e edit+continue · x end the turn)"


class DecisionCard(Widget, can_focus=True):
    """One waiting call of the shown thread, with its decision keys."""

    DEFAULT_CSS = """
    DecisionCard {
        display: none;
        height: auto;
        max-height: 75%;
        border: round $warning;
        border-title-color: $warning;
        border-title-style: bold;
        padding: 0 1;
    }
    DecisionCard.-shown { display: block; }
    DecisionCard:focus { border: double $warning; }
    DecisionCard VerticalScroll { height: auto; max-height: 16; scrollbar-size-vertical: 1; }
    DecisionCard .card--why { dock: top; color: $foreground-muted; }
    DecisionCard .card--keys { dock: bottom; color: $foreground-muted; text-style: italic; }
    DecisionCard.-armed .card--keys { color: $foreground; text-style: bold; }
    DecisionCard > .card--outside { color: $error; text-style: bold; }
    DecisionCard > .card--network { color: $warning; text-style: bold; }
    """
    COMPONENT_CLASSES = {"card--outside", "card--network"}

    BINDINGS = [
        Binding("a", "decide('approve')", "Approve"),
        Binding("a", "decide('continue')", "Continue", tooltip="Go on from the pause"),
        Binding("n", "decide('step')", "Step", tooltip="One inference or one tool round, "
                "then pause again"),
        Binding("A", "decide('remember')", "Approve+remember"),
        Binding("R", "decide('remember_room')", "Approve+remember room", show=False),
        Binding("x", "decide('cancel')", "Deny"),
        Binding("x", "decide('end_turn')", "End turn",
                tooltip="Cancel at the pause: the whole turn ends (it asks first)"),
        Binding("e", "decide('edit')", "Edit+approve"),
        Binding("e", "decide('edit_pause')", "Edit+continue"),
        Binding("u", "decide('use')", "Use a result"),
        Binding("O", "decide('outside')", "Approve outside the sandbox", show=False,
                tooltip="Approve a shell call to run outside the sandbox (this call only)"),
        Binding("N", "decide('network')", "Approve with the network", show=False,
                tooltip="Approve a shell call to run in the sandbox, with the network"),
        Binding("enter", "decide('details')", "Details"),
        Binding("tab", "back", "Chat", show=False),
    ]  # fmt: skip
    DECISION_KEYS = frozenset("aARxeu")
    PAUSE_KEYS = frozenset("anxe")
    SANDBOX_KEYS = {"O": "outside", "N": "network"}

    armed: reactive[bool] = reactive(False)

    class Decide(Message):
        """The operator pressed a decision key on the card's call."""

        def __init__(self, action: str, call: CallRow) -> None:
            super().__init__()
            self.action, self.call = action, call

    class GiveBack(Message):
        """A key typed before the card's keys were armed: it belongs to the chat's input
        (`character`: what it types; None: the focus only)."""

        def __init__(self, character: str | None) -> None:
            super().__init__()
            self.character = character

    def __init__(self, clock: Callable[[], float], keys_clock: Callable[[], float] = time.monotonic,
                 workspace: Path | None = None, tools: ToolFacts | None = None,
                 **kw: object) -> None:  # fmt: skip
        super().__init__(**kw)  # type: ignore[arg-type]
        self.clock = clock
        self.tools = tools or ToolFacts()  # what is said of the call's tool, and the sandbox
        self.keys_clock = keys_clock  # for ARM (seconds, monotonic); tests pass their own
        self.workspace = workspace
        self.call: CallRow | None = None
        self._shown_key: tuple[str, object] | None = None  # the call and arguments drawn
        self._held_at = float("inf")  # when the card last took the keyboard (inf: not armed)

    def compose(self) -> ComposeResult:
        yield Static("", classes="card--why")
        with VerticalScroll():
            yield Static("", id="card-args")
        yield _KeyLine(classes="card--keys")

    # -- what it shows ----------------------------------------------------------------------

    def show_call(self, call: CallRow | None, *, by_operator: bool = False) -> bool:
        """Show `call` (None: hide). Returns whether the call shown changed. A change not
        made by the operator's own decision disarms the keys for ARM seconds."""
        key = None if call is None else (call.call_id, repr(call.args))
        changed = key != self._shown_key
        if is_pause(call) != is_pause(self.call):
            self.refresh_bindings()  # a pause's keys are not a call's (check_action)
        self.call, self._shown_key = call, key
        self.set_class(call is not None, "-shown")
        if call is None:
            self._disarm()
            return changed
        if changed:
            self._draw(call)
            if self.has_focus and not by_operator:
                self.hold(arm_now=False)
        self._draw_why(call)
        return changed

    def _draw(self, call: CallRow) -> None:
        pause = is_pause(call)
        sections = (pause_sections(call, self.workspace) if pause else
                    shown_args(call.tool, call.args, self.workspace))  # fmt: skip
        parts: list[Content] = []
        for label, body in sections:
            if len(sections) > 1 or pause or label not in ("command", "arguments"):
                parts.append(Content.styled(f"{label}\n", "$foreground-muted"))
            parts.append(body)
        shown = Content("\n").join(parts) if parts else Content("(no arguments)")
        if call.tool == "shell" and sections and sections[-1][0] == "command":
            shown = Content.styled("$ ", "bold $warning") + shown
        self.query_one("#card-args", Static).update(shown)
        title = headline(call) if pause else f"⏸ {call.tool} waits for you · {call.thread_id}"
        set_title(self, title)  # text, not markup

    def _draw_why(self, call: CallRow) -> None:
        now = self.clock()
        why = [f"waiting {age(now - call.updated_at)}"]
        if call.error:  # the suspend reason: which rule asked, or the tool's own ask
            why.append(visible(call.error))
        if call.deadline_at is not None:
            then = "approved" if call.on_deadline == "approve" else "cancelled"
            why.append(f"{then} at {clock_time(call.deadline_at)} "
                       f"(in {time_left(call.deadline_at - now)}) if undecided")  # fmt: skip
        shown = Content(" · ".join(why))
        narrow = 0 < self.size.width < NARROW
        about = None if is_pause(call) else self.tools.about(call.tool)
        if about is not None:  # the sandbox, the server
            line, level = about
            style = {"error": "bold $error", "warning": "bold $warning"}.get(level, "")
            # Narrow, the command keeps its room: the line joins the why, and a sandbox that
            # confines the call is said by the key that runs it outside ("O outside")
            if not (narrow and self.sandbox_keys()):
                shown += Content(" · " if narrow else "\n") + Content.styled(visible(line), style)
        self.query_one(".card--why", Static).update(shown)
        self._draw_keys()

    def _draw_keys(self) -> None:
        if self.is_mounted:
            self.query_one(_KeyLine).refresh(layout=True)

    refresh_keys = _draw_keys

    def key_line(self) -> str:
        """What the card's keys do now: live, in a moment, or how to reach them."""
        call = self.call
        if call is None:
            return ""
        focused = self.app.focused is self  # read as it is drawn, not as an event said
        narrow = 0 < self.size.width < NARROW
        if is_pause(call):
            keys = NARROW_PAUSE_KEYS if narrow else PAUSE_KEYS
            return ("tab: decide here" if not focused and narrow else
                    PAUSE_AWAY if not focused else keys if self.armed else WAIT_LINE)  # fmt: skip
        keys = NARROW_KEYS if narrow else KEYS_LINE
        if sandboxed := self.sandbox_keys():  # how else it may run: after approve (narrow:
            extra = [key[narrow] for key in sandboxed if key[narrow]]  # on a line of its own)
            keys = (f"{keys}\n{' · '.join(extra)}" if narrow else
                    keys.replace("a approve", f"a approve · {' · '.join(extra)}", 1))  # fmt: skip
        return (REVIEW_LINE if call.under_review else
                "tab: decide here" if not focused and self.size.width < NARROW else
                AWAY_LINE if not focused else keys if self.armed else WAIT_LINE)  # fmt: skip

    def sandbox_keys(self) -> list[tuple[str, str]]:
        """The words of the sandbox keys this call offers (none but for a shell call)."""
        call = self.call
        if call is None:
            return []
        return [key for key, action in ((OUTSIDE_KEY, "outside"), (NETWORK_KEY, "network"))
                if self.tools.offers(call.tool, action)]  # fmt: skip

    def on_resize(self) -> None:
        if self.call is not None:
            self._draw_why(self.call)  # (narrow, the line about the tool joins the why)
        self._draw_keys()

    def tick(self) -> None:
        """Redraw what ages (the wait, the deadline's time left)."""
        if self.call is not None:
            self._draw_why(self.call)

    # -- the keyboard -----------------------------------------------------------------------

    def hold(self, *, arm_now: bool) -> None:
        """Take the keyboard; the keys act at once (`arm_now`: the operator's own Tab) or
        after ARM seconds of holding it visibly."""
        self._held_at = self.keys_clock() - (ARM if arm_now else 0.0)
        self.armed = self.keys_clock() - self._held_at >= ARM  # (at once: Tab; a test's clock)
        if not self.has_focus:
            self.focus()
        if not arm_now:
            self.set_timer(ARM, self._arm_shown, name="arm")
        self._draw_keys()

    def _arm_shown(self) -> None:
        """Show the keys live once ARM seconds have passed (looked at again until then)."""
        self.armed = self.is_armed()
        self._draw_keys()
        if not self.armed and self.has_focus:
            left = ARM - (self.keys_clock() - self._held_at)
            self.set_timer(min(ARM, max(0.05, left)), self._arm_shown, name="arm")

    def _disarm(self) -> None:
        self._held_at, self.armed = float("inf"), False

    def is_armed(self) -> bool:
        return self.has_focus and self.keys_clock() - self._held_at >= ARM

    def watch_armed(self, armed: bool) -> None:
        self.set_class(armed, "-armed")

    def on_focus(self) -> None:
        if self._held_at == float("inf"):  # reached by a click or the focus chain
            self.hold(arm_now=False)
        self._draw_keys()  # (it says what its keys do now it has the keyboard)

    def on_blur(self) -> None:
        self._disarm()
        self._draw_keys()

    async def on_key(self, event: events.Key) -> None:
        if self.is_armed():
            if not self.armed:
                self._arm_shown()
            keys = self.PAUSE_KEYS if is_pause(self.call) else self.DECISION_KEYS
            if event.key in ("tab", "enter") or event.character in keys:
                return  # the bindings act
            sandbox = self.SANDBOX_KEYS.get(event.character or "")
            if sandbox and self.call is not None and self.tools.offers(self.call.tool, sandbox):
                return  # (a sandbox key where there is none to leave is the chat's letter)
            if event.key in self.screen.active_bindings and not sandbox:
                return  # the screen's keys (d the queue, ! review, ? help, ...) act as anywhere
            if event.is_printable:  # any other letter: the operator writes to the chat
                event.stop()
                event.prevent_default()
                self.post_message(self.GiveBack(event.character))
            return
        if event.key in ("tab", "escape"):
            return  # to the input; Esc leaves the chat (ChatPane)
        # Not armed yet: whatever was typed was meant for the chat (or was too quick).
        event.stop()
        event.prevent_default()
        self.post_message(self.GiveBack(event.character if event.is_printable else None))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A pause's keys for a pause, a call's for a call (console/pause.py)."""
        if action != "decide" or not parameters:
            return True
        return offered(str(parameters[0]), is_pause(self.call))

    def action_decide(self, action: str) -> None:
        if self.call is None or not self.is_armed():
            return
        if not offered(action, is_pause(self.call)):
            return
        if action in SANDBOX_ACTIONS and not self.tools.offers(self.call.tool, action):
            return  # (the palette's: only a shell call in a sandbox runs another way)
        if self.call.under_review and action != "details":
            self.notify(f"{self.call.tool} call {self.call.call_id} was running when agentdeck "
                        "stopped: its outcome is unknown, so it takes a review, not a decision. "
                        "Press ! to review it.", title="Needs review", severity="warning")  # fmt: skip
            return
        self.post_message(self.Decide(action, self.call))

    def action_back(self) -> None:
        self.post_message(self.GiveBack(None))


class _KeyLine(Widget):
    """The card's key line, worked out as it is drawn (focus events come in either order
    with the focus moving again: what is drawn is what holds then)."""

    DEFAULT_CSS = "_KeyLine { height: auto; }"

    def render(self) -> Text:
        card = self.parent
        if not isinstance(card, DecisionCard):
            return Text("")
        line = Text(card.key_line())
        narrow = 0 < card.size.width < NARROW
        for key, style in ((OUTSIDE_KEY, "card--outside"), (NETWORK_KEY, "card--network")):
            if key[narrow]:
                line.highlight_words([key[narrow]], card.get_component_rich_style(style))
        return line
