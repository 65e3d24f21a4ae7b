"""The command palette (ctrl+p): threads, theme, cancel turn, scheduler, every pane's actions
(and the history, scheduler, rules, channels, rooms and review screens' own while one is
shown).

Pane actions are read from the widgets' bindings, so a new binding shows up here (and in
the footer and help screen) without further code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.groups import FILTERS
from console.widgets.groups_table import GroupsTable

if TYPE_CHECKING:
    from console.screens.main import MainScreen

SKIP = {"cursor", "cursor_down", "cursor_up", "first", "last", "answer", "dismiss"}


def _bindings(items: Iterable[object]) -> Iterator[Binding]:
    return (b for b in items if isinstance(b, Binding))


class DeckCommands(Provider):
    """Every operator action by name."""

    def _main(self) -> MainScreen | None:
        from console.screens.main import MainScreen

        return next((s for s in self.app.screen_stack if isinstance(s, MainScreen)), None)

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        main = self._main()
        if main is None:
            return
        app: Any = self.app
        from console.screens.channels import ChannelsScreen, RoomsScreen
        from console.screens.history import HistoryScreen
        from console.screens.review import ReviewScreen
        from console.screens.rules import RulesScreen
        from console.screens.scheduler import SchedulerScreen

        if isinstance(self.screen, HistoryScreen):
            yield from self.screen.commands()
            return
        if isinstance(self.screen, SchedulerScreen):
            yield from self._scheduler_commands(self.screen)
            return
        if isinstance(self.screen, RulesScreen):
            yield from self._rules_commands(self.screen)
            return
        if isinstance(self.screen, ChannelsScreen | RoomsScreen):
            yield from self._channels_commands(self.screen)
            return
        if isinstance(self.screen, ReviewScreen):
            yield from self.screen.commands()
            return
        yield "New thread", "Start a new chat thread", main.action_new_thread
        yield "Switch thread…", "Pick the thread the chat shows", main.action_switch_thread
        for thread in main.state.recent_threads:
            yield (
                f"Switch thread: {thread}",
                "Show this thread in the chat",
                partial(main.switch_thread, thread),
            )
        yield (
            "Cancel turn",
            "Cancel the selected running turn (asks first)",
            main.action_cancel_turn,
        )
        for group in FILTERS:
            yield (
                f"Filter timeline by group: {group or 'all'}",
                "Show only the steps of this group's threads",
                partial(main.filter_group, group),
            )
        for channel in main.channel_filters():
            yield (
                f"Filter timeline by channel: {channel or 'all'}",
                "Show only the steps of turns from this channel",
                partial(main.filter_channel, channel),
            )
        yield "Switch theme", "Pick a colour theme (remembered)", app.action_change_theme
        yield "Help: keys", "Every key of the console", app.action_help
        for pane, selector in (("Timeline", "#timeline"), ("Calls", "#calls"),
                               ("Decisions", "#decisions")):  # fmt: skip
            node = main.query_one(selector)
            for b in _bindings(node.BINDINGS):
                if b.action.split("(")[0] not in SKIP and b.description:
                    yield (
                        f"{pane}: {b.description}",
                        f"key {b.key}",
                        partial(node.run_action, b.action),
                    )
        for b in _bindings(main.BINDINGS):
            if b.description and b.action not in ("cancel_turn", "new_thread", "switch_thread"):
                yield b.description, f"key {b.key}", partial(main.run_action, b.action)

    def _scheduler_commands(self, screen: Any) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app
        table = screen.query_one(GroupsTable)
        for b in _bindings(GroupsTable.BINDINGS):
            if b.action.split("(")[0] not in SKIP and b.description:
                yield (
                    f"Scheduler: {b.description}",
                    f"key {b.key} (the selected group)",
                    partial(table.run_action, b.action),
                )
        yield "Close scheduler", "Back to the main screen", screen.action_close
        yield "Switch theme", "Pick a colour theme (remembered)", app.action_change_theme
        yield "Help: keys", "Every key of the console", app.action_help

    def _rules_commands(self, screen: Any) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        from console.widgets.rules_table import RulesTable

        app: Any = self.app
        table = screen.query_one(RulesTable)
        yield "Rules: Revoke rule", "key x (the selected rule; asks first)", table.action_revoke
        yield "Close rules", "Back to the main screen", screen.action_close
        yield "Switch theme", "Pick a colour theme (remembered)", app.action_change_theme
        yield "Help: keys", "Every key of the console", app.action_help

    def _channels_commands(self, screen: Any) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        from console.screens.channels import ChannelsScreen
        from console.widgets.channel_tables import DeliveriesTable

        app: Any = self.app
        if isinstance(screen, ChannelsScreen):
            table = screen.query_one(DeliveriesTable)
            yield ("Deliveries: Retry delivery", "key r (the selected dead one; asks first)",
                   table.action_retry)  # fmt: skip
            yield ("Deliveries: Drop delivery", "key x (the selected dead or retrying one; "
                   "asks first)", table.action_drop)  # fmt: skip
            yield "Rooms on the bus", "key o", screen.action_rooms
            yield "Close channels", "Back to the main screen", screen.action_close
        else:
            yield "Close rooms", "Back to the previous screen", screen.action_close
        yield "Switch theme", "Pick a colour theme (remembered)", app.action_change_theme
        yield "Help: keys", "Every key of the console", app.action_help

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            if (score := matcher.match(title)) > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
