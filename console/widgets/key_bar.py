"""The footer: the keys of the focused pane (or of the dialog over it), on one line.

Textual's Footer mounts a widget per key and composes them again whenever focus moves,
which made a Tab between panes cost ~180 ms of restyling and a full relayout. This bar
reads the same `screen.active_bindings` (shown bindings, one entry per action, the
command palette's key on the right) and only repaints its one line. A click on a key
presses it, as with Textual's footer. While a dialog is open over its screen, it shows the
dialog's keys: the keys of the screen beneath do nothing then.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget):
    """Shown bindings of the focused widget and its ancestors: `key Description`."""

    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        .key-bar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .key-bar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._spans: list[tuple[int, int, str, bool]] = []  # start, end, key, enabled

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.app.screen_change_signal.subscribe(self, self._screen_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)
        self.app.screen_change_signal.unsubscribe(self)

    def _screen_changed(self, screen: Screen[object]) -> None:
        if screen is not self.screen:  # a dialog over ours: follow its focus too
            screen.bindings_updated_signal.unsubscribe(self)
            screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.refresh()

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.app.screen:
            self.refresh()

    def _keys(self) -> tuple[list[tuple[Binding, bool]], tuple[Binding, bool] | None]:
        """(the shown bindings, one per action; the command palette's binding or None)."""
        active = self.app.screen.active_bindings  # a dialog's, while one is open
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, _tip = active[self.app.COMMAND_PALETTE_BINDING]
            palette = (binding, enabled)
        seen = {palette[0].action} if palette is not None else set()
        shown: list[tuple[Binding, bool]] = []
        for _node, binding, enabled, _tip in active.values():
            if binding.show and binding.action not in seen:
                seen.add(binding.action)
                shown.append((binding, enabled))
        return shown, palette

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        text_style = self.get_component_rich_style("key-bar--description")
        dim = Style(dim=True)
        shown, palette = self._keys()
        line = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []

        def label(binding: Binding) -> tuple[str, str]:
            return f" {self.app.get_key_display(binding)} ", f"{binding.description} "

        def add(binding: Binding, enabled: bool) -> None:
            off = Style() if enabled else dim
            start = line.cell_len
            key, text = label(binding)
            line.append(key, key_style + off)
            line.append(text, text_style + off)
            self._spans.append((start, line.cell_len, binding.key, enabled))

        # The palette's key keeps its place on the right; keys that do not fit before it
        # end in an ellipsis rather than a cut word.
        right = sum(map(len, label(palette[0]))) + 1 if palette is not None else 0
        room = self.size.width - right
        for binding, enabled in shown:
            if line.cell_len + sum(map(len, label(binding))) > room - 2:  # "…" and "▏"
                line.append("…", text_style)
                break
            add(binding, enabled)
        if palette is not None:
            line.append(" " * max(0, room - line.cell_len - 1) + "▏", text_style)
            add(*palette)
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, key, enabled in self._spans:
            if start <= event.x < end:
                event.stop()
                if enabled:
                    self.app.simulate_key(key)
                else:
                    self.app.bell()
                return
