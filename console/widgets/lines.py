"""The base of the line-rendered views (timeline, chat, calls): growing and scrolling cheaply.

Two costs of `ScrollView` matter when a view changes every frame:

- `virtual_size` is a layout reactive: setting it re-lays out the whole screen and redraws
  every pane. A line view's size on screen never depends on how many lines it holds, so
  `set_rows` changes it without a layout (one happens only if a scrollbar appears).
- The scrollbar is drawn through Rich and costs about as much as the lines themselves. A
  view that grows or scrolls by itself (new lines arriving, follow mode) moves its thumb at
  most `SCROLLBAR_HZ` times a second; scrolling the operator asks for moves it at once.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget

SCROLLBAR_HZ = 5


class LineView(ScrollView):
    """A `ScrollView` for `render_line` widgets that change many times a second."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._quiet_scroll = False  # a scroll the view made itself: the caller repaints
        self._bar_stale = False

    def on_mount(self) -> None:
        self.set_interval(1 / SCROLLBAR_HZ, self._sync_scrollbar, name="scrollbar")

    def set_rows(self, rows: int, width: int | None = None) -> None:
        """Hold `rows` lines, without laying out the screen."""
        size = Size(self.size.width if width is None else width, rows)
        if size == self.virtual_size:
            return
        self.set_reactive(Widget.virtual_size, size)
        self._refresh_scrollbars()  # shows or hides them (a layout only then)
        self.scroll_quietly(self.scroll_y)  # clamp to the new size
        self._bar_stale = True

    def scroll_quietly(self, y: float) -> None:
        """Scroll to line `y` without repainting (the caller repaints what changed) and
        leave the scrollbar for the next sync."""
        self._quiet_scroll = True
        try:
            self.scroll_target_y = self.scroll_y = y
        finally:
            self._quiet_scroll = False

    def watch_scroll_y(self, old: float, new: float) -> None:
        if self._quiet_scroll:
            self._bar_stale = True
            return
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = new
        if round(old) != round(new):
            self.refresh(self.size.region)

    def _sync_scrollbar(self) -> None:
        if not self._bar_stale:
            return
        self._bar_stale = False
        if self.show_vertical_scrollbar:
            bar = self.vertical_scrollbar  # each reactive repaints the bar only if it moved
            bar.window_virtual_size = self.virtual_size.height
            bar.window_size = self.container_size.height - self.scrollbar_size_horizontal
            bar.position = self.scroll_y
