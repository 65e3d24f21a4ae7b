"""The main screen: chat, timeline, calls and decisions, and the operator's actions on them.

Widgets post what the operator asked for; this screen asks the questions (reason, diff,
confirmation) and hands the answer to the bridge. It redraws panes from the bridge's
state when `Bridge.Changed` arrives, at most once a frame: the panes the bridge says are
due (its pacing keeps keys quick in a flood).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input

from console import settings
from console.attention import Attention
from console.breaking import BreakAt
from console.bridge import CALLS, CHAT, STATUS, TIMELINE, Bridge
from console.context_use import nearest, thread_context
from console.copying import copy_call
from console.format import set_title, short_id
from console.screens.compacting import compact
from console.screens.decide_flow import Decider
from console.screens.opening import open_screen
from console.screens.outbox import Outbox
from console.screens.running import Running
from console.screens.telling import Teller
from console.screens.threads import ThreadPickerScreen
from console.screens.timeline_filters import TimelineFilters
from console.spinner import FPS as SPIN_FPS
from console.widgets.calls_table import CallsTable
from console.widgets.chat_log import ChatLog
from console.widgets.chat_pane import ChatPane
from console.widgets.decision_card import DecisionCard
from console.widgets.decision_queue import DecisionQueue
from console.widgets.filter_bar import FilterBar
from console.widgets.key_bar import KeyBar
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import Timeline

DEFAULT_THREAD = "chat:main"


class MainScreen(Screen[None]):
    """The operator's day: four panes, a status bar and the footer."""

    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding(
            "escape",
            "stop_armed",
            "Stop turn",
            priority=True,
            tooltip="Stop the turn: the Esc right after one left the chat",
        ),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("c", "cancel_turn", "Cancel turn"),
        Binding("ctrl+n", "new_thread", "New thread"),
        Binding("ctrl+t", "switch_thread", "Threads"),
        Binding("s", "open('scheduler')", "Scheduler"),
        Binding("r", "open('rules')", "Rules", show=False),
        Binding("b", "open('breakpoints')", "Breakpoints", show=False),
        Binding("h", "open('history')", "History", show=False),
        Binding("I", "open('instructions')", "Instructions", show=False),
        Binding("K", "compact", "Compact thread", show=False),
        Binding("U", "compact(True)", "Undo compaction", show=False),
        Binding("l", "open('channels')", "Channels", show=False),
        Binding("o", "open('rooms')", "Rooms and their inbox", show=False),
        Binding("T", "open('tools')", "Tools and the sandbox", show=False),
        Binding("ctrl+r", "whole_output", "Tools' output whole/cut", show=False),
        Binding("ctrl+g", "cycle_group", "Group filter", show=False),
        Binding("ctrl+l", "cycle_channel", "Channel filter", show=False),
        Binding("d", "focus_pane('decisions')", "Decisions", show=False),
        Binding("i", "focus_pane('chat-input')", "Chat", show=False),
        Binding("exclamation_mark", "open('review')", "Review after a crash", show=False),
    ]

    class Acted(Message):
        """An operator action reached the runtime: what, on which id, and its answer."""

        def __init__(self, action: str, target: str, result: Any = None) -> None:
            super().__init__()
            self.action, self.target, self.result = action, target, result

    def __init__(self, bridge: Bridge, clock: Any,
                 keys_clock: Callable[[], float] = time.monotonic,
                 attention: Attention | None = None) -> None:  # fmt: skip
        super().__init__()
        self.attention = attention or Attention()  # bell and desktop notification
        self.bridge, self.clock, self.keys_clock = bridge, clock, keys_clock
        self.state = bridge.state
        self.thread_id = DEFAULT_THREAD
        self.selected_turn = ""
        self.outbox = Outbox(self, lambda: self.query_one(ChatPane).redraw())
        self.filters = TimelineFilters(self)
        self.decider = Decider(self, bridge, self._redraw_pending, self.outbox.act)
        self.teller = Teller(self, self.state, self.decider.mine, lambda: self.attention)
        self._opened = False  # a runtime was reached once: the thread to show was chosen
        self.running = Running(self)  # the spinner, and the Esc that stops the chat's turn
        self._stoppable = False  # the shown thread has a turn running or waiting

    def compose(self) -> ComposeResult:
        # A grid, so that a narrow terminal can give the decisions the whole width (CSS)
        with Grid(id="panes"):
            room = getattr(self.app, "room", None)
            chat = ChatPane(self.thread_id, self.clock, self.keys_clock,
                            room.workspace if room is not None else None, id="chat")  # fmt: skip
            chat.calls_of = self.state.calls_of
            chat.stoppable = lambda: self.state.active_turn(self.thread_id) is not None
            chat.tools = self.state.tools  # what a card says of its call's tool, the sandbox
            yield chat
            with Vertical(id="timeline-pane", classes="pane"):
                yield FilterBar(placeholder="filter steps", id="timeline-filter")
                yield Timeline(self.state.steps, id="timeline", breakable=True,
                               empty="no steps yet: they appear here as turns run")  # fmt: skip
            with Vertical(id="calls-pane", classes="pane"):
                yield CallsTable(id="calls", breakable=True)
            with Vertical(id="decisions-pane", classes="pane"):
                yield FilterBar(placeholder="filter decisions", id="decisions-filter")
                yield DecisionQueue(self.clock, keys_clock=self.keys_clock, tools=self.state.tools,
                                    id="decisions")  # fmt: skip
        yield StatusBar(id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#timeline-pane"), "Timeline")
        set_title(self.query_one("#calls-pane"), "Calls")
        self._title_decisions()
        self.query_one("#chat-input").focus()
        self.set_interval(1.0, self._tick_ages, name="ages")
        self.set_interval(1 / SPIN_FPS, self.running.spin, name="spinner")
        status = self.query_one(StatusBar)
        self.watch(self.query_one(Timeline), "follow", lambda v: setattr(status, "follow", v))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The focus moved: the card's key line says where its keys are now (its own focus
        events may come in either order with a quick second move)."""
        self.query_one(DecisionCard).refresh_keys()

    async def on_key(self, event: events.Key) -> None:
        """Keys typed while the screen was still being built reach the screen itself, not
        the input (nothing had the focus yet): they are the chat's, typed in order. (Once
        the input has the focus it takes every printable key and Enter itself, so one that
        comes here with the input focused was typed before.)"""
        field = self.query_one("#chat-input", Input)
        if self.focused not in (None, field):
            return
        if event.is_printable and event.character:
            event.stop()
            field.focus()
            field.insert_text_at_cursor(event.character)
        elif event.key in ("enter", "ctrl+j") and field.value:  # (typed ahead, Enter is \n)
            event.stop()
            field.focus()
            await field.action_submit()

    # -- from the bridge --------------------------------------------------------------------

    @on(Bridge.Attached)
    async def attached(self, event: Bridge.Attached) -> None:
        status = self.query_one(StatusBar)
        info = event.info
        status.room, status.run_id, status.model = info.room, info.run_id, info.model
        was_gone, status.mode = status.mode.startswith("detached"), info.mode
        self.query_one(ChatPane).describe(info.room, info.model)
        if not self._opened:  # first: the thread this operator last showed here, or the chat
            self._opened = True
            room = getattr(self.app, "room", None)
            remembered = settings.last_thread(room.path) if room is not None else None
            self.thread_id = remembered or DEFAULT_THREAD
        await self._show_thread(self.thread_id)  # (again: the one shown before the gap)
        self.outbox.flush()
        self.query_one(Timeline).refresh_rows()
        self._redraw_pending()
        self._count()
        self.teller.runtime_back(info, was_gone)

    @on(Bridge.Detached)
    def detached(self, event: Bridge.Detached) -> None:
        self.query_one(StatusBar).mode = "detached: no runtime"
        self.teller.runtime_gone(event.why, event.free)

    @on(Bridge.Changed)
    def changed(self, event: Bridge.Changed) -> None:
        # everything folded since the last draw, at most once a frame, and the panes due now
        ch, due = self.bridge.take(self.thread_id, self.selected_turn)
        if TIMELINE in due:
            self.query_one(Timeline).refresh_rows()
        if CHAT in due:
            self.query_one(ChatPane).redraw()
        if CALLS in due:
            self._redraw_calls()
        if STATUS in due:
            self._count()
        if ch.pending:
            self._redraw_pending()
        self.teller.changes(ch, self.thread_id)
        if ch.deliveries and hasattr(self.app.screen, "readings"):  # the channels screen
            self.app.screen.refresh_view()  # type: ignore[attr-defined]

    def _count(self) -> None:
        status = self.query_one(StatusBar)
        counts = self.state.counts()
        stoppable = self.state.active_turn(self.thread_id) is not None
        if (counts[0] + counts[1] > 0) != (status.running + status.waiting > 0) or (
            stoppable != self._stoppable
        ):  # `c` shows in the footer while a turn runs or waits, Esc's "twice: stop" too
            self._stoppable = stoppable
            self.refresh_bindings()
        status.running, status.waiting = counts
        status.calls = len(self.state.pending)
        status.nearing = nearest(self.state)  # a thread near its context window
        status.spent, status.held = self.state.spend.usage, self.state.spend.held_text()
        status.sandbox = self.state.tools.warning()  # "no sandbox" where none can be made
        self.query_one(ChatPane).show_context(thread_context(self.state, self.thread_id))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`c` (cancel a turn) is offered only while there is one to cancel."""
        if action == "cancel_turn":
            return self.running.cancel_target() is not None
        if action == "stop_armed":  # the key right after the Esc that left the chat
            return self.running.armed()
        return True

    def key_pressed(self, count: int) -> None:
        self.running.key_pressed(count)

    @on(ChatPane.StopArmed)
    def stop_armed(self, event: ChatPane.StopArmed) -> None:
        self.running.arm(event.thread_id)

    def action_stop_armed(self) -> None:
        self.running.stop()

    def _redraw_pending(self) -> None:
        self.query_one(DecisionQueue).show_pending(self.state.pending, self.state.decided)
        self.query_one(StatusBar).calls = len(self.state.pending)
        self._title_decisions()
        self._show_card()

    def _show_card(self) -> None:
        """The chat's card shows the oldest call of its thread that waits for a decision
        from here; one this console just decided gives way to the next without a pause."""
        decided = self.state.decided
        waiting = [c for c in self.state.pending.values()
                   if c.thread_id == self.thread_id and c.call_id not in decided]  # fmt: skip
        card = self.query_one(DecisionCard)
        mine = card.call is not None and card.call.call_id in decided
        self.query_one(ChatPane).show_call(waiting[0] if waiting else None, by_operator=mine)

    def _title_decisions(self) -> None:
        title = f"Decisions ({len(self.state.pending)})"
        pane = self.query_one("#decisions-pane")
        set_title(pane, title)

    def _redraw_calls(self) -> None:
        self.query_one(CallsTable).show(self.selected_turn, self.state.calls_of(self.selected_turn),
                                        self.clock(), self.running.frame)  # fmt: skip
        title = f"Calls · {short_id(self.selected_turn) if self.selected_turn else 'no turn'}"
        turn = self.state.turns.get(self.selected_turn or "")
        if turn is not None and (turn.input_tokens or turn.output_tokens):
            title += f" · {turn.input_tokens:,} in / {turn.output_tokens:,} out tokens"
        pane = self.query_one("#calls-pane")
        set_title(pane, title)

    def _tick_ages(self) -> None:
        if self.state.spend.due(self.clock()):  # a hold may have ended: the room says
            self.run_worker(self.bridge.read_budgets(), group="budgets")
        if self.state.pending:
            self.query_one(DecisionQueue).show_pending(self.state.pending)
            self.query_one(DecisionCard).tick()

    def select_turn(self, turn_id: str) -> None:
        self.selected_turn = turn_id
        self._redraw_calls()

    async def _show_thread(self, thread_id: str) -> None:
        """Show `thread_id` in the chat; it is the most recently used thread now."""
        from console.seed import load_thread

        if thread_id != self.thread_id and (room := getattr(self.app, "room", None)) is not None:
            settings.remember_thread(room.path, thread_id)
        self.thread_id = thread_id
        self.state.note_thread(thread_id)
        if self.bridge.client is not None:
            await load_thread(self.bridge.client, self.state, thread_id, self.bridge.watch)
        if self.thread_id != thread_id:  # another was chosen while this one loaded: it wins
            return
        self.query_one(ChatPane).show(self.state.thread(thread_id))
        self.query_one(ChatPane).show_context(thread_context(self.state, thread_id))
        self._show_card()

    # -- from the widgets -------------------------------------------------------------------

    @on(Timeline.Selected)
    def timeline_selected(self, event: Timeline.Selected) -> None:
        # Moving through the timeline redraws the calls pane with the bridge's next frame,
        # not once per key, so a held j/k goes as fast as the keys come.
        self.selected_turn = event.turn_id
        self.bridge.want(CALLS)

    @on(Timeline.OpenTurn)
    def timeline_open(self, event: Timeline.OpenTurn) -> None:
        self.select_turn(event.turn_id)
        self.query_one(CallsTable).focus()

    @on(CallsTable.ShowDetails)
    def call_details(self, event: CallsTable.ShowDetails) -> None:
        if (call := self.state.calls.get(event.call_id)) is not None:
            self.decider.decide("details", call)

    @on(BreakAt)
    def break_at(self, event: BreakAt) -> None:
        from console.screens.set_breakpoint import break_here  # (loaded on use)

        self.run_worker(break_here(self, self.bridge, event), group="break")

    @on(CallsTable.Copy)
    def copy_call(self, event: CallsTable.Copy) -> None:
        copy_call(self, self.state.calls.get(event.call_id),
                  "output" if event.what == "output" else "command")  # fmt: skip

    @on(ChatPane.Send)
    def chat_send(self, event: ChatPane.Send) -> None:
        self.outbox.send(event.thread_id, event.text)

    @on(ChatPane.Compose)
    def chat_compose(self, event: ChatPane.Compose) -> None:
        self._write_in_editor(event.thread_id, event.text, event.recalled)

    @work(group="compose")
    async def _write_in_editor(self, thread_id: str, text: str, recalled: bool) -> None:
        from console.screens.compose import ComposeScreen  # opened by a paste, not at start

        sent = await self.app.push_screen_wait(ComposeScreen(thread_id, text))
        if sent is not None:
            self.query_one(ChatPane).composed(thread_id, sent, recalled)

    @on(DecisionQueue.Decide)
    def decide(self, event: DecisionQueue.Decide) -> None:
        self.select_turn(event.call.turn_id)
        self.decider.decide(event.action, event.call, event.ask)

    @on(DecisionQueue.DecideMarked)
    def decide_marked(self, event: DecisionQueue.DecideMarked) -> None:
        self.decider.decide_marked(event.action, event.calls)

    @on(DecisionCard.Decide)
    def card_decide(self, event: DecisionCard.Decide) -> None:
        self.select_turn(event.call.turn_id)
        self.decider.decide(event.action, event.call)

    @on(Input.Changed, "FilterBar")
    def filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        if event.input.id == "timeline-filter":
            self.query_one(Timeline).filter_text = event.value
        else:
            queue = self.query_one(DecisionQueue)
            queue.filter_text = event.value
            queue.show_pending(self.state.pending)

    @on(Input.Submitted, "FilterBar")
    def filter_done(self, event: Input.Submitted) -> None:
        event.stop()
        target = Timeline if event.input.id == "timeline-filter" else DecisionQueue
        self.query_one(target).focus()

    @on(FilterBar.Cleared)
    def filter_cleared(self, event: FilterBar.Cleared) -> None:
        event.bar.remove_class("-shown")
        target = Timeline if event.bar.id == "timeline-filter" else DecisionQueue
        self.query_one(target).focus()

    # -- actions ----------------------------------------------------------------------------

    @work(group="compact")
    async def action_compact(self, undo: bool = False) -> None:
        """K: compact the chat's thread now; U: undo its last compaction (both ask)."""
        await compact(self, undo)

    def action_whole_output(self) -> None:
        """ctrl+r: every tool's output in the chat whole, or cut after a screenful again."""
        log = self.query_one(ChatLog)
        log.whole = not log.whole
        log.rebuild()

    def action_focus_pane(self, which: str) -> None:
        self.query_one(f"#{which}").focus()

    def action_filter(self) -> None:
        self.filters.open_bar(decisions=isinstance(self.focused, DecisionQueue))

    def action_clear_filter(self) -> None:
        self.filters.clear()

    @work(group="cancel")
    async def action_cancel_turn(self) -> None:
        await self.running.ask_cancel()  # (it asks first)

    async def action_new_thread(self) -> None:
        n, known = 2, set(self.state.recent_threads)
        while f"chat:{n}" in known:
            n += 1
        thread = f"chat:{n}"
        await self._show_thread(thread)
        self.query_one("#chat-input").focus()
        self.post_message(self.Acted("new_thread", thread))

    @work(group="threads")
    async def action_switch_thread(self) -> None:
        picked = await self.app.push_screen_wait(
            ThreadPickerScreen(
                self.state.recent_threads,
                self.thread_id,
                {t: thread_context(self.state, t) for t in self.state.context},
            )
        )
        if picked:
            await self.switch_thread(picked)

    async def switch_thread(self, thread_id: str) -> None:
        await self._show_thread(thread_id)
        self.query_one("#chat-input").focus()
        self.post_message(self.Acted("switch_thread", thread_id))

    # -- other screens, and the timeline's filters ---------------------------------------------------------

    def action_open(self, name: str) -> None:
        """Open another screen: the scheduler, rules, channels, rooms, review, history,
        tools, or the instructions of the thread the chat shows."""
        self.app.push_screen(open_screen(name, self.bridge, self.clock, self.app.room,  # type: ignore[attr-defined]
                                         self.thread_id))  # fmt: skip

    def action_cycle_group(self) -> None:
        self.filters.cycle_group()

    def action_cycle_channel(self) -> None:
        self.filters.cycle_channel()
