"""The conversation of one thread, drawn line by line, with the answer streaming at the end.

Each entry is wrapped once per width and cached; a frame with new text deltas redraws only
the streaming tail. The view sticks to the bottom unless the operator scrolled up.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.state import ChatEntry, ThreadView

LABELS = {"user": "you", "assistant": "agent", "tool": "tool", "system": "system"}


class ChatLog(ScrollView, can_focus=False):
    """Line-rendered chat of the thread it is given."""

    COMPONENT_CLASSES = {"chat--operator", "chat--agent", "chat--tool", "chat--label"}

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.view: ThreadView | None = None
        self._lines: list[Strip] = []
        self._cache: dict[tuple[int, int], list[Strip]] = {}

    def show(self, view: ThreadView | None) -> None:
        """Draw `view` (another thread, or the same one with new entries)."""
        if view is not self.view:
            self._cache.clear()
        self.view = view
        self.rebuild()

    def rebuild(self) -> None:
        at_bottom = self.scroll_y >= self.max_scroll_y - 1
        width = max(10, self.scrollable_content_region.width or self.size.width)
        lines: list[Strip] = []
        if self.view is not None:
            for entry in self.view.entries:
                key = (id(entry), width)
                drawn = self._cache.get(key)
                if drawn is None:
                    drawn = self._cache[key] = self._draw(entry, width)
                lines.extend(drawn)
            if self.view.streaming:
                lines.extend(self._draw(ChatEntry("assistant", self.view.streaming + "▌"), width))
        if len(self._cache) > 2 * (len(self.view.entries) if self.view else 0) + 50:
            self._cache.clear()
        self._lines = lines
        self.virtual_size = Size(width, len(lines))
        if at_bottom:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def _draw(self, entry: ChatEntry, width: int) -> list[Strip]:
        role = {"user": "chat--operator", "tool": "chat--tool"}.get(entry.role, "chat--agent")
        style = self.get_component_rich_style(role)
        text = Text()
        text.append(
            f"{LABELS.get(entry.role, entry.role)} › ",
            style + self.get_component_rich_style("chat--label"),
        )
        body = entry.text if entry.role != "tool" else " ".join(entry.text.split())[:200]
        text.append(body or "(no text)", style)
        console = self.app.console
        wrapped = text.wrap(console, width)
        strips = [
            Strip(line.render(console), line.cell_len).adjust_cell_length(width, self.rich_style)
            for line in wrapped
        ]
        strips.append(Strip.blank(width, self.rich_style))
        return strips

    def on_resize(self) -> None:
        self._cache.clear()
        self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        if index < len(self._lines):
            return self._lines[index]
        return Strip.blank(self.size.width, self.rich_style)
