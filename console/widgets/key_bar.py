"""The footer: the keys of the focused pane (or of the dialog over it), on one line.

The focused widget's keys come first, then those of the panes and screen around it, so
what the operator is most likely to press next is never the part that is left out; keys
that do not fit are not cut: the line ends with `? more`, and `?` lists every key by pane.
Quitting and the command palette keep their place on the right.

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

PINNED = frozenset({"quit"})  # actions shown on the right, with the palette
PREFERRED = frozenset({"ctrl+q"})  # of a pinned action's keys, the one shown


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

    def _keys(self) -> tuple[list[tuple[Binding, bool]], list[tuple[Binding, bool]]]:
        """(the shown bindings, one per action, the focused widget's first; those pinned
        to the right: quitting, the command palette)."""
        active = self.app.screen.active_bindings  # a dialog's, while one is open
        right: list[tuple[Binding, bool]] = []
        seen: set[str] = set()
        ranked: list[tuple[int, int, Binding, bool]] = []
        palette = self.app.COMMAND_PALETTE_BINDING if self.app.ENABLE_COMMAND_PALETTE else None
        for n, (node, binding, enabled, _tip) in enumerate(active.values()):
            if binding.key == palette or binding.action in PINNED:
                if binding.action not in seen and (binding.show or binding.key == palette):
                    seen.add(binding.action)
                    right.append((binding, enabled))
                elif binding.key in PREFERRED:  # the key shown for it (^q, not ^c)
                    right = [(binding, enabled) if b.action == binding.action else (b, e)
                             for b, e in right]  # fmt: skip
                continue
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            ranked.append((-len(node.ancestors_with_self), n, binding, enabled))
        shown = [(b, e) for _, _, b, e in sorted(ranked, key=lambda r: (r[0], r[1]))]
        return shown, right

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        text_style = self.get_component_rich_style("key-bar--description")
        dim = Style(dim=True)
        shown, right = self._keys()
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

        # Quitting and the palette keep their place on the right; keys that do not fit
        # before them are left to `?` (said once, as a key of its own), never cut.
        pinned = sum(sum(map(len, label(b))) for b, _ in right) + 1 if right else 0
        more = Binding("question_mark", "app.help", "more")
        room = self.size.width - pinned - sum(map(len, label(more)))
        for n, (binding, enabled) in enumerate(shown):
            width = sum(map(len, label(binding)))
            last = n == len(shown) - 1
            if line.cell_len + width > (room + sum(map(len, label(more))) if last else room):
                add(more, True)
                break
            add(binding, enabled)
        if right:
            line.append(" " * max(0, self.size.width - pinned - line.cell_len) + "▏", text_style)
            for binding, enabled in right:
                add(binding, enabled)
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
