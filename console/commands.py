"""The command palette (ctrl+p): every key of the screen on top and of its panes, read
from the key registry (console/keys.py), so a new binding shows up here (and in the footer
and the help screen) without further code; on the main screen also each recent thread and
each filter of the timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.groups import FILTERS
from console.keys import Command, commands

if TYPE_CHECKING:
    from console.screens.main import MainScreen


class DeckCommands(Provider):
    """Every operator action by name: the keys of the screen on top and of its panes
    (console/keys.py), and on the main screen the threads and the timeline's filters."""

    def _main(self) -> MainScreen | None:
        from console.screens.main import MainScreen

        return next((s for s in self.app.screen_stack if isinstance(s, MainScreen)), None)

    def _commands(self) -> Iterator[Command]:
        main = self._main()
        if main is None:
            return
        screen = self.screen
        panes = [node for node in screen.query("*") if node.BINDINGS]
        offered = {c.title for c in self.app.get_system_commands(screen)}  # (Quit, Keys…)
        yield from (c for c in commands([screen, *panes, self.app]) if c[0] not in offered)
        if screen is not main:
            return
        for thread in main.state.recent_threads:
            yield (f"Switch thread: {thread}", "Show this thread in the chat",
                   partial(main.switch_thread, thread))  # fmt: skip
        for group in FILTERS:
            yield (f"Filter timeline by group: {group or 'all'}",
                   "Show only the steps of this group's threads",
                   partial(main.filter_group, group))  # fmt: skip
        for channel in main.channel_filters():
            yield (f"Filter timeline by channel: {channel or 'all'}",
                   "Show only the steps of turns from this channel",
                   partial(main.filter_channel, channel))  # fmt: skip

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            if (score := matcher.match(title)) > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
