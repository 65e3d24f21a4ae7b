"""The timeline's group and channel filters, as the main screen sets them and titles them,
and the text filter bars (`/`) of the timeline and the decision queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.format import set_title
from console.groups import channel_filters, next_channel, next_filter
from console.widgets.filter_bar import FilterBar
from console.widgets.timeline import Timeline

if TYPE_CHECKING:
    from console.screens.main import MainScreen


class TimelineFilters:
    """Which group's threads and which channel's turns the timeline shows."""

    def __init__(self, screen: MainScreen) -> None:
        self.screen = screen
        self._group_titled = False  # once a group was picked, the title says which (or all)

    @property
    def timeline(self) -> Timeline:
        return self.screen.query_one(Timeline)

    def cycle_group(self) -> None:
        self.group(next_filter(self.timeline.group))

    def group(self, group: str) -> None:
        """Show only the steps of `group`'s threads in the timeline ("" for every group)."""
        self.timeline.group = group
        self._group_titled = True
        self._title()
        self.screen.post_message(self.screen.Acted("filter_group", group))

    def channels(self) -> list[str]:
        """All, the console, and each channel a turn or step here came from."""
        state = self.screen.state
        return channel_filters([*(t.channel for t in state.turns.values()),
                                *(r.channel for r in state.steps)])  # fmt: skip

    def cycle_channel(self) -> None:
        self.channel(next_channel(self.timeline.channel, self.channels()))

    def channel(self, channel: str) -> None:
        """Show only the steps of turns from `channel` in the timeline ("" for every one,
        "console" for the console's own)."""
        self.timeline.channel = channel
        self._title()
        self.screen.post_message(self.screen.Acted("filter_channel", channel))

    def open_bar(self, decisions: bool) -> None:
        """Show the filter bar of the timeline (`decisions`: of the decision queue), focused."""
        bar = self.screen.query_one("#decisions-filter" if decisions else "#timeline-filter",
                                    FilterBar)  # fmt: skip
        bar.add_class("-shown")
        bar.focus()

    def clear(self) -> None:
        """Clear every filter bar shown or holding text, and the channel filter."""
        for bar in self.screen.query(FilterBar):
            if bar.has_class("-shown") or bar.value:
                bar.action_clear_filter()
        if self.timeline.channel:
            self.channel("")

    def _title(self) -> None:
        timeline = self.timeline
        title = "Timeline"
        if self._group_titled:
            title += f" · {timeline.group or 'all groups'}"
        if timeline.channel:
            title += f" · via {timeline.channel}"
        set_title(self.screen.query_one("#timeline-pane"), title)
