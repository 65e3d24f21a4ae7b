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
from textual.content import Content
from textual.fuzzy import Matcher
from textual.markup import escape

from console.format import visible
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
        system = list(self.app.get_system_commands(screen))  # Textual's own: Quit, Theme, Keys…
        offered = {c.title for c in system}
        # An app binding whose action one of those runs is offered once, as Textual's (f2's
        # "Switch theme" is Textual's "Theme").
        runs = frozenset(getattr(c.callback, "__name__", "").removeprefix("action_")
                         for c in system if getattr(c.callback, "__self__", None) is self.app)  # fmt: skip
        ours = [*commands([screen, *panes]), *commands([self.app], skip=runs)]
        yield from (c for c in ours if c[0] not in offered)
        if screen is not main:
            return
        from console.screens.diff import ask_for_turns

        yield ("Diff two turns…", "Compare two turns side by side, by their ids",
               partial(ask_for_turns, self.app, self.app.room))  # type: ignore[attr-defined]  # fmt: skip
        for thread in main.state.recent_threads:
            yield (f"Switch thread: {thread}", "Show this thread in the chat",
                   partial(main.switch_thread, thread))  # fmt: skip
        for group in FILTERS:
            yield (f"Filter timeline by group: {group or 'all'}",
                   "Show only the steps of this group's threads",
                   partial(main.filters.group, group))  # fmt: skip
        for channel in main.filters.channels():
            yield (f"Filter timeline by channel: {channel or 'all'}",
                   "Show only the steps of turns from this channel",
                   partial(main.filters.channel, channel))  # fmt: skip

    # A title may name a thread or a channel, whoever chose it, and the palette reads a
    # string as markup (`chat:[bus]` showed as `chat:`; `[/]` raised): titles are Content,
    # help texts escaped.
    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            shown = visible(title)
            yield DiscoveryHit(Content(shown), callback, text=shown, help=escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            shown = visible(title)
            if (score := matcher.match(shown)) > 0:
                yield Hit(score, _highlight(matcher, shown), callback, text=shown,
                          help=escape(help_text))  # fmt: skip


def _highlight(matcher: Matcher, title: str) -> Content:
    """`title` as text, the characters `matcher` matched highlighted (Matcher.highlight
    reads it as markup)."""
    content = Content(title)
    _score, offsets = matcher.fuzzy_search.match(matcher.query, title)
    for offset in offsets:
        if not title[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
