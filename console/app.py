"""The agentdeck console: wiring only. Screens, widgets, bridge and host do the work.

`make_app` is the factory tests, snapshots and the benchmark use (fixed clock, fixed ids,
an injected model); `run_console` is what `agentdeck` with no arguments calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import App
from textual.binding import Binding
from textual.notifications import Notification, Notify, SeverityLevel
from textual.theme import Theme
from textual.worker import Worker, WorkerState

import themes
from console import settings
from console.attention import Attention
from console.bridge import FPS, Bridge
from console.collector import Collector
from console.format import visible
from console.host import AttachedHost, Host, RuntimeHost, console_provider
from console.key_path import passes_through
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.screens.main import MainScreen
from console.strips import patch as uncycle_strips
from console.travel import ForkAt, ReplayOf
from console.widgets.text import NoControls
from engine.room import Room, stop_asked

uncycle_strips()  # Textual's drawn lines would each be a reference cycle (console/strips.py)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
STOP_GRACE = 3.0  # seconds the exit may take after a stop signal, once the room is closed
CLOSE_WAIT = 10.0  # seconds the app waits at exit for the runtime to close the room
MAX_TOASTS = 3  # notifications shown at once (the oldest gives way): see themes/app.tcss


def _deck_commands() -> Any:
    """The palette's provider, imported when the palette first opens (not at start)."""
    from console.commands import DeckCommands

    return DeckCommands


class AgentDeck(App[int]):
    """The operator console over one room."""

    TITLE = "agentdeck"
    CSS_PATH = str(Path(themes.__file__).with_name("app.tcss"))
    COMMANDS = App.COMMANDS | {_deck_commands}
    # Classes every screen gets by the terminal's size; themes/app.tcss styles them.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("q", "quit", "Quit", show=False),
        # ctrl+q and ctrl+c quit as q does (asking while a hosted turn runs), from anywhere:
        # in the chat's input too, where Textual would copy (the terminal's selection copies)
        Binding("ctrl+q,ctrl+c", "quit", "Quit", priority=True),
        Binding("question_mark,f1", "help", "Help"),
        Binding("f2", "change_theme", "Switch theme", show=False),
        Binding("ctrl+o", "host_here", "Host the room here", show=False),
    ]

    def __init__(self, room: Room, *, clock: Callable[[], float] = time.time,
                 ids: Callable[[str], str] | None = None, provider: Any = None,
                 fps: int = FPS, tune_process: bool = False, attach: bool = False,
                 serve_api: bool = True, loops: bool = True,
                 keys_clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__()
        self.room, self.clock, self.tune_process = room, clock, tune_process
        self.bridge = Bridge(fps=fps)
        self._hosting = dict(clock=clock, ids=ids, provider=provider, serve_api=serve_api,
                             loops=loops)  # fmt: skip
        self.host: Host = AttachedHost(room) if attach else RuntimeHost(room, **self._hosting)
        self.main = MainScreen(self.bridge, clock, keys_clock, Attention.of_room(room.config))
        self.closed_why: str | None = None  # said on the terminal once the screen is given back
        self._conditions: dict[str, Notification] = {}  # condition -> its toast
        self.keys_pressed = 0  # keys the terminal sent, counted before any binding runs
        self.collector = Collector(lambda: self.keys_pressed)  # (started by `tune_process`)
        settings.use_themes(self)
        self._filters.append(NoControls())

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.keys_pressed += 1  # (a key that must follow another at once asks this)
            self.main.key_pressed(self.keys_pressed)
            if await self._bound_at_once(event):
                return
        await super().on_event(event)

    async def _bound_at_once(self, event: events.Key) -> bool:
        """Run the key's binding now when it would reach the bindings untouched anyway
        (console/key_path.py): on the main screen (whose own `on_key` takes only keys
        typed before the input had the focus), from a pane that lets keys pass."""
        screen = self.screen
        if (screen is not self.main or not self.app_focus or screen.maximized is not None
                or not passes_through(self.focused, screen)):  # fmt: skip
            return False
        screen._clear_tooltip()  # as Textual's own path does for a key
        return await self._check_bindings(event.key, priority=True) or await self._check_bindings(
            event.key
        )

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False,
               condition: str | None = None) -> None:  # fmt: skip
        """Every notification is text, never markup (it quotes calls, threads, errors),
        with its control characters shown escaped. One about a `condition` (the runtime
        gone, calls waiting) replaces the last about it, and `withdraw` takes it back when
        the condition is over: one toast per condition, none about a state that is past."""
        if condition is not None:
            self.withdraw(condition)
        shown = Notification(visible(message, lines=True), visible(title), severity,
                             self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
                             markup=False)  # fmt: skip
        if condition is not None:
            self._conditions[condition] = shown
        self.post_message(Notify(shown))

    def withdraw(self, condition: str) -> None:
        """Take back the toast about `condition`, if it is still shown."""
        shown = self._conditions.pop(condition, None)
        if shown is not None and shown in self._notifications:
            self._unnotify(shown)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return settings.state_variables(self)

    def get_default_screen(self) -> MainScreen:
        return self.main  # not a blank default screen first, composed and drawn for nothing

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._save_theme)
        self.run_worker(self.host.serve(self.bridge, self.main), name="runtime",
                        exit_on_error=False)  # fmt: skip
        if self.tune_process:  # the process is the console's own (tests share theirs)
            loop = asyncio.get_running_loop()
            for sig in STOP_SIGNALS:  # kill, a closed terminal: quit as `q` would, no asking
                signal.signal(sig, lambda *_: self._stop_signal(loop))

    def _save_theme(self, theme: Theme) -> None:
        try:
            settings.save({"theme": theme.name})
        except Exception as exc:  # the operator's own file: whatever is wrong, the app goes on
            self.notify(f"The theme applies, but is not remembered: {exc}", severity="warning")

    @on(Bridge.Attached)
    def _started(self) -> None:
        # What the first screen does not show (the room's loops and API) starts once the
        # attached run is drawn; the process is tuned once that has started too (hosted:
        # `RuntimeHost.Settled`), so the heap it freezes holds the API's modules as well.
        if isinstance(self.host, RuntimeHost):
            self.call_after_refresh(self.host.first_screen_drawn)
        else:
            self._settled()

    @on(RuntimeHost.Settled)
    def _settled(self) -> None:
        # Only where the process is the console's own (`run_console`, the benchmark);
        # tests share theirs with each other.
        if self.tune_process:
            self.call_after_refresh(self.collector.start, self)

    @on(ForkAt)
    def _fork_at(self, event: ForkAt) -> None:
        from console.screens.travelling import fork_at  # (loaded on use)

        self.run_worker(fork_at(self, event), group="travel", exclusive=True)

    @on(ReplayOf)
    def _replay_of(self, event: ReplayOf) -> None:
        from console.screens.travelling import replay_of  # (loaded on use)

        self.run_worker(replay_of(self, event), group="replay")

    def on_notify(self, event: Notify) -> None:
        """Before Textual's own handler shows the new notification, the oldest shown beyond
        MAX_TOASTS - 1 give way, so the stack at the top stays clear of the queue (Textual
        has no public way to drop one: these are the names its own handler uses)."""
        for old in list(self._notifications)[: -(MAX_TOASTS - 1) or None]:
            self._unnotify(old, refresh=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.name == "runtime" and event.state is WorkerState.ERROR:
            why = f"agentdeck: {self.host.error or event.worker.error}"
            self.exit(1, message=Text(visible(why, lines=True)))  # text, never markup

    async def action_host_here(self) -> None:
        """The owner went away and nobody owns the room: host it in this console."""
        host = self.host
        if not isinstance(host, AttachedHost) or not host.free:
            self.notify("This console hosts the room only once nobody owns it.",
                        severity="warning")  # fmt: skip
            return
        await host.close()
        self.host = RuntimeHost(self.room, **self._hosting)  # type: ignore[arg-type]
        self.run_worker(self.host.serve(self.bridge, self.main), name="runtime",
                        exit_on_error=False)  # fmt: skip

    def action_help(self) -> None:
        from console.keys import help_sections

        self.push_screen(HelpScreen(help_sections()))

    @work(group="quit", exclusive=True)
    async def action_quit(self) -> None:  # type: ignore[override]  # (a worker: it may ask)
        running, _ = self.bridge.state.counts()
        if running and self.host.hosted:  # attached: the runtime goes on without this console
            ok = await self.push_screen_wait(ConfirmScreen(
                f"{running} turn{'s are' if running > 1 else ' is'} still running. Quit anyway? "
                "(The next start recovers it from its last checkpoint; a tool call that was "
                "running is run again only if its tool is idempotent.)",
                yes="Quit", no="Stay"))  # fmt: skip
            if not ok:
                return
        await self.shutdown()

    async def on_unmount(self) -> None:
        """However the app ends (quit, an error, a test harness's exit), the runtime closes
        before the event loop does: Textual cancels the runtime's worker without waiting
        for it, and its store's thread must not finish into a closed loop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.host.close(), CLOSE_WAIT)
        if self.tune_process:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)

    def _stop_signal(self, loop: asyncio.AbstractEventLoop) -> None:
        """A stop signal, in Python's own handler rather than the loop's: it runs even while
        the loop is stuck (after a hang-up, Textual's writes to the gone terminal queue up
        and then wait). The loop closes the room and exits when it can; whatever happens,
        the process ends CLOSE_WAIT + STOP_GRACE seconds from now."""
        self.closed_why = _stopped_by(self.room)
        bound = threading.Timer(CLOSE_WAIT + STOP_GRACE, os._exit, (0,))
        bound.daemon = True
        bound.start()
        loop.call_soon_threadsafe(lambda: self.run_worker(self._stop()))

    async def _stop(self) -> None:
        """A stop signal: close the room and exit, and make sure the process ends.

        After a hang-up, Textual's exit can block for ever: its writer thread dies on the
        first write to the gone terminal, and its queue of writes fills. Nothing is left to
        lose once the room is closed, so the process ends STOP_GRACE seconds later anyway.
        """
        await self.shutdown()
        timer = threading.Timer(STOP_GRACE, os._exit, (self.return_code or 0,))
        timer.daemon = True  # a normal exit does not wait for it
        timer.start()

    async def shutdown(self, return_code: int = 0) -> None:
        """Close the runtime (turns stop, the room is released), then exit."""
        if not self.host.closed.is_set():
            await self.host.close()
        self.exit(return_code)


def _stopped_by(room: Room) -> str | None:
    """Why a stop signal closed this console, when `agentdeck stop` sent it (its note in
    the room names this process as the owner it stops)."""
    note = stop_asked(room)
    if note is None:
        return None
    by, pid = (visible(str(note.get(k, "?"))) for k in ("by", "pid"))
    return f"agentdeck: the room's runtime was stopped by `{by}` (pid {pid}), so the console closed"


def make_app(room: Room | str | Path, *, clock: Callable[[], float] = time.time,
             ids: Callable[[str], str] | None = None, provider: Any = None,
             fps: int = FPS, tune_process: bool = False, attach: bool = False,
             serve_api: bool = True, loops: bool = True,
             keys_clock: Callable[[], float] = time.monotonic) -> AgentDeck:  # fmt: skip
    """An app over `room`, hosting its runtime or (`attach`) a client of its owner; tests
    pass a fixed clock, ids and provider, and the clock of key timing (`keys_clock`,
    monotonic seconds: a decision key just after the focus reached the queue asks first)."""
    room = room if isinstance(room, Room) else Room.at(room)
    return AgentDeck(room, clock=clock, ids=ids, provider=provider, fps=fps,
                     tune_process=tune_process, attach=attach, serve_api=serve_api,
                     loops=loops, keys_clock=keys_clock)  # fmt: skip


def run_console(room: Room) -> int:
    """`agentdeck` with no arguments: the console over `room`, with visible streaming.
    On a free room it hosts the runtime; when another process owns the room, it attaches
    to that owner (quitting leaves the runtime running)."""
    from engine.room import owner_of

    room.path.mkdir(parents=True, exist_ok=True)
    attach = owner_of(room) is not None  # (the provider serves if it comes to host: ctrl+o)
    if not attach:
        room.check_writable()  # a read-only room is one line before the screen, not after
    app = make_app(room, provider=console_provider(room), tune_process=True, attach=attach)
    code = app.run()
    if app.closed_why is not None:  # the screen is the terminal's again: said where it stays
        print(app.closed_why, file=sys.stderr)  # noqa: T201
    return code if isinstance(code, int) else (app.return_code or 0)
