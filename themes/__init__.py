"""Colour themes (data, in agentdeck.toml) and the app stylesheet (app.tcss).

Themes are data so that adding one is editing a file, not code. The stylesheet refers only
to variables; `STATE_DEFAULTS` gives every state variable a value derived from Textual's
base colours, and `visible_defaults` the borders and the selection a value that shows on
the theme's background, so Textual's built-in themes work too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib.resources import files

from rich.terminal_theme import TerminalTheme
from textual.color import Color
from textual.theme import Theme

from themes.contrast import least, ratios

# Fallbacks for themes without the state variables (Textual's built-ins): the name of
# the base colour variable each one borrows.
STATE_DEFAULTS = {
    "state-running": "primary",
    "state-waiting": "warning",
    "state-suspended": "warning",
    "state-succeeded": "success",
    "state-failed": "error",
    "state-cancelled": "foreground-muted",
    "state-muted": "foreground-muted",
    "chat-operator": "primary",
    "chat-agent": "foreground",
    "chat-tool": "foreground-muted",
}

# The variables that keep the panes' borders and the selected row visible (app.tcss):
# each names where it starts from in a built-in theme (`visible_defaults`). agentdeck's
# own themes set them (tests/console/test_themes.py checks every theme's).
VISIBLE = {
    "pane-border": "panel-lighten-2",  # a pane's border, and the chat input's
    "pane-border-focus": "primary",  # the border of the pane that has the focus
    "cursor": "primary",  # the selected row of the focused list
    "cursor-blurred": "background",  # the selected row of a list without the focus
}
BORDER_CONTRAST = 3.0  # WCAG 1.4.11, a border or a selection over the background
TEXT_CONTRAST = 4.5  # WCAG 1.4.3, the text on the selected row (in truecolor)
STEPS = 40  # how finely a colour is moved until it shows

# Textual's ANSI themes are the terminal's own colours: the borders in its foreground
# colour, the selection as the terminal palette allows (keyed by the theme's `dark`).
ANSI_VISIBLE = {
    True: {
        "pane-border": "ansi_default",
        "pane-border-focus": "ansi_blue",
        "cursor": "ansi_blue",
        "cursor-text": "ansi_black",
        "cursor-blurred": "ansi_white",
        "cursor-blurred-text": "ansi_black",
    },
    False: {
        "pane-border": "ansi_default",
        "pane-border-focus": "ansi_blue",
        "cursor": "ansi_blue",
        "cursor-text": "ansi_bright_white",
        "cursor-blurred": "ansi_bright_black",
        "cursor-blurred-text": "ansi_black",
    },
}

DARK, LIGHT = "agentdeck-dark", "agentdeck-light"


def load_themes() -> list[Theme]:
    """agentdeck's own themes, read from agentdeck.toml."""
    data = tomllib.loads(files(__name__).joinpath("agentdeck.toml").read_text("utf-8"))
    return [Theme(name=name, **spec) for name, spec in data["theme"].items()]


def visible_defaults(theme: Theme, base: Mapping[str, str],
                     terminal: TerminalTheme) -> dict[str, str]:  # fmt: skip
    """The border and selection variables (`VISIBLE`, and the text on each selection) for
    a theme that lacks them, from its colour system `base`: each starts from the colour
    it borrows and is lightened (a dark theme) or darkened, its hue kept, then moved
    toward white or black, until it clears BORDER_CONTRAST over the background in
    truecolor, 256 and 16 colours (and a selection, until a text colour reads on it)."""
    if theme.ansi:
        return dict(ANSI_VISIBLE[theme.dark])
    background = Color.parse(base["background"]).rich_color
    texts = [Color.parse(base["foreground"]), Color.parse(base["background"]),
             Color(255, 255, 255), Color(0, 0, 0)]  # fmt: skip
    end = Color(255, 255, 255) if theme.dark else Color(0, 0, 0)
    out: dict[str, str] = {}
    for name, borrowed in VISIBLE.items():
        start = Color.parse(base[borrowed])
        way = [start.lighten(n / STEPS) if theme.dark else start.darken(n / STEPS)
               for n in range(STEPS + 1)]  # fmt: skip
        way += [way[-1].blend(end, n / STEPS) for n in range(1, STEPS + 1)]
        selection = name.startswith("cursor")
        color = next((c for c in way if least(c.rich_color, background, terminal)
                      >= BORDER_CONTRAST and (not selection or _reads_on(c, texts, terminal))),
                     end)  # fmt: skip
        out[name] = color.hex
        if selection:
            text = _reads_on(color, texts, terminal) or _best_on(color, texts, terminal)
            out[f"{name}-text"] = text.hex
    return out


def _reads_on(color: Color, texts: list[Color], terminal: TerminalTheme) -> Color | None:
    """The first of `texts` that reads on `color` (TEXT_CONTRAST in truecolor, where text
    is drawn as chosen; BORDER_CONTRAST in 256 and 16 colours, which move it), if any."""
    for text in texts:
        seen = ratios(text.rich_color, color.rich_color, terminal)
        if seen["truecolor"] >= TEXT_CONTRAST and min(seen.values()) >= BORDER_CONTRAST:
            return text
    return None


def _best_on(color: Color, texts: list[Color], terminal: TerminalTheme) -> Color:
    return max(texts, key=lambda text: least(text.rich_color, color.rich_color, terminal))
