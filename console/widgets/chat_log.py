"""The conversation of one thread, drawn line by line, with the answer streaming at the end.

Each entry is wrapped once per width and theme; what is kept of it is its line count (so
the view knows its height) and, for the entries last drawn, the drawn lines (a small LRU:
a drawn line is several objects the cyclic garbage collector has to walk). A frame with
new text deltas redraws only the streaming tail, one with new entries wraps only those.
The view sticks to the bottom unless the operator scrolled up.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region
from textual.strip import Strip

from console.format import visible
from console.state import CallRow
from console.threads import ChatEntry, ThreadView
from console.tool_lines import TOOL_LINES, find_call, tool_text
from console.widgets.lines import LineView

LABELS = {"user": "you", "assistant": "agent", "tool": "tool", "system": "system"}
DRAWN_ENTRIES = 32  # entries whose drawn lines are kept (a screen's worth and more)


class ChatLog(LineView, can_focus=False):
    """Line-rendered chat of the thread it is given."""

    _CLASSES = ("chat--operator", "chat--agent", "chat--tool", "chat--label", "chat--hint",
                "chat--ok", "chat--bad")  # fmt: skip
    COMPONENT_CLASSES = set(_CLASSES)

    def __init__(self, calls_of: Callable[[str], list[CallRow]] = lambda turn_id: [],
                 **kw: object) -> None:  # fmt: skip
        super().__init__(**kw)  # type: ignore[arg-type]
        self.calls_of = calls_of  # a turn's calls (console/state.py), for its tools' entries
        self.view: ThreadView | None = None
        self._entries: list[ChatEntry] = []  # the view's entries when last rebuilt
        self._starts: list[int] = [0]  # first line of each entry, then the total
        # id(entry) -> (entry, line count); the entry is held so its id is not reused.
        self._counts: dict[int, tuple[ChatEntry, int]] = {}
        self._drawn: LRUCache[int, tuple[ChatEntry, list[Strip]]] = LRUCache(DRAWN_ENTRIES)
        self._drawn_for: tuple[object, ...] = ()  # the width and styles drawn lines are for
        self._width = 10
        self._tail: list[Strip] = []  # the streaming answer, or the hint of an empty thread
        self._tail_for: tuple[object, ...] | None = None  # what the tail was drawn from
        self._version = -1
        self.hint = ""  # what an empty thread shows instead of nothing
        self.activity = ""  # what runs in the thread now ("⠋ $ make · 3s"), while nothing streams
        self.output: list[tuple[str, str]] = []  # the last lines its running call printed
        self.whole = False  # tools' outputs shown whole (ctrl+r), not cut after a screenful
        # At the bottom, new lines keep it there; the operator scrolling up ends that. Kept,
        # not read off the scroll position: a resize moves the bottom, not the operator.
        self._stick = True

    def show_activity(self, activity: str, output: list[tuple[str, str]] | None = None) -> None:
        """What runs in the thread now, drawn at the end while no answer streams ("": none),
        and under it the last lines its running call printed, as (stream, text); only the
        tail is redrawn."""
        output = output or []
        if activity != self.activity or output != self.output:
            self.activity, self.output = activity, output
            self.rebuild()

    def show(self, view: ThreadView | None) -> None:
        """Draw `view` (another thread, or the same one with new entries)."""
        if view is not self.view:
            self._counts, self._version, self._stick = {}, -1, True  # a thread opens at its end
            self._drawn.clear()
        self.view = view
        self.rebuild()

    def rebuild(self) -> None:
        width = max(10, self.scrollable_content_region.width or self.size.width)
        looks = (width, self._cut_at(), self.rich_style,
                 *map(self.get_component_rich_style, self._CLASSES))  # fmt: skip
        if looks != self._drawn_for:
            self._drawn_for, self._width, self._version, self._tail_for = looks, width, -1, None
            self._counts = {}
            self._drawn.clear()
        view = self.view
        version = view.version if view is not None else 0
        same_entries, top = version == self._version, int(self.scroll_y)
        if not same_entries:
            entries = list(view.entries) if view is not None else []
            counts: dict[int, tuple[ChatEntry, int]] = {}
            starts = [0]
            for entry in entries:
                hit = self._counts.get(id(entry))
                if hit is None or hit[0] is not entry:
                    hit = (entry, len(self._lines_of(entry)))
                counts[id(entry)] = hit
                starts.append(starts[-1] + hit[1])
            self._entries, self._counts, self._starts = entries, counts, starts
            self._version = version
        streaming = view.streaming if view is not None else ""
        tail: tuple[object, ...] = (
            ("hint", self.hint) if not (self._entries or streaming or self.activity) else
            ("answer", streaming) if streaming or not self.activity else
            ("activity", self.activity, tuple(self.output))
        )  # fmt: skip
        if tail != self._tail_for:
            self._tail_for = tail
            if streaming:
                self._tail = self._draw(ChatEntry("assistant", streaming + "▌"), width)
            elif tail[0] == "activity":  # what runs now, with its spinner and time
                self._tail = self._activity_lines(width)
            else:
                hint = Text()  # (the style on a span: a Text's own style is not rendered)
                said = str(tail[1])  # the hint, or nothing (an answer that has not begun)
                hint.append(said, self.get_component_rich_style("chat--hint"))
                self._tail = self._strips(hint, width) if said else []
        self.set_rows(self._starts[-1] + len(self._tail), width)
        if self._stick:
            self.scroll_quietly(self.max_scroll_y)
        tail_at = self._starts[-1] - top  # the screen line where the tail begins
        if same_entries and int(self.scroll_y) == top and tail_at > 0:
            # Only the tail changed (the spinner's frame, an answer streaming on its line):
            # repaint its lines, not the chat's whole height (a far-apart repaint costs a key).
            height = self.size.height
            if tail_at < height:
                self.refresh(Region(0, tail_at, self.size.width, height - tail_at))
        else:
            self.refresh()

    def _cut_at(self) -> int | None:
        """Lines of a tool's output drawn before "… +N lines": a screenful, less the lines
        around it (None: whole, ctrl+r)."""
        return None if self.whole else max(TOOL_LINES, self.size.height - 6)

    def _activity_lines(self, width: int) -> list[Strip]:
        """The spinner's line, then what the running call printed last, a screen line for
        each line printed: each is cut at the edge (the time comes first in the spinner's
        line, and the last lines of a terminal are read so; the full lines are in the
        result)."""
        muted = self.get_component_rich_style("chat--hint")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(self.activity, muted)
        styles = {"stderr": self.get_component_rich_style("chat--bad"), "skipped": muted}
        for stream, line in self.output:
            text.append("\n  ")
            text.append(visible(line.expandtabs()) or " ", styles.get(stream, Style()))
        console = self.app.console
        options = console.options.update(width=width, no_wrap=True, overflow="ellipsis")
        lines = console.render_lines(text, options, style=self.rich_style, pad=True)
        return [Strip(segments, width) for segments in lines]

    def _lines_of(self, entry: ChatEntry) -> list[Strip]:
        hit = self._drawn.get(id(entry))
        if hit is None or hit[0] is not entry:
            hit = (entry, self._draw(entry, self._width))
            self._drawn[id(entry)] = hit
        return hit[1]

    def _draw(self, entry: ChatEntry, width: int) -> list[Strip]:
        role = {"user": "chat--operator", "tool": "chat--tool", "system": "chat--tool"}.get(
            entry.role, "chat--agent"
        )
        style = self.get_component_rich_style(role)
        text = Text()
        text.append(
            f"{visible(entry.via or LABELS.get(entry.role, entry.role))} › ",
            style + self.get_component_rich_style("chat--label"),
        )
        if entry.role == "tool":
            call = find_call(entry.text, self.calls_of(entry.turn_id))
            text.append_text(tool_text(entry.text, call, {
                "head": style + Style(bold=True), "muted": self.get_component_rich_style("chat--hint"),
                "ok": self.get_component_rich_style("chat--ok"),
                "bad": self.get_component_rich_style("chat--bad"),
            }, self._cut_at()))  # fmt: skip
        else:
            text.append(visible(entry.text, lines=True) or "(no text)", style)
        return [*self._strips(text, width), Strip.blank(width, self.rich_style)]

    def _strips(self, text: Text, width: int) -> list[Strip]:
        """`text` wrapped to `width`, one strip a line, over the widget's style (so a blank
        line is styled too, as NO_COLOR's filter needs)."""
        console = self.app.console
        lines = console.render_lines(text, console.options.update_width(width),
                                     style=self.rich_style, pad=True)  # fmt: skip
        return [Strip(segments, width) for segments in lines]

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if not self._quiet_scroll:  # the operator's scroll (or one clamped to the end)
            self._stick = new >= self.max_scroll_y - 1

    def on_resize(self) -> None:
        self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self.call_later(self.rebuild)  # redraws only if the styles did change

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        starts = self._starts
        if index < starts[-1]:
            at = bisect_right(starts, index) - 1
            return self._lines_of(self._entries[at])[index - starts[at]]
        index -= starts[-1]
        if index < len(self._tail):
            return self._tail[index]
        return Strip.blank(self.size.width, self.rich_style)
