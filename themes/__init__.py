"""Colour themes (data, in agentdeck.toml) and the app stylesheet (app.tcss).

Themes are data so that adding one is editing a file, not code. The stylesheet refers only
to variables; `STATE_DEFAULTS` gives every state variable a value derived from Textual's
base colours, so Textual's built-in themes work too.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files

from textual.theme import Theme

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

DARK, LIGHT = "agentdeck-dark", "agentdeck-light"


def load_themes() -> list[Theme]:
    """agentdeck's own themes, read from agentdeck.toml."""
    data = tomllib.loads(files(__name__).joinpath("agentdeck.toml").read_text("utf-8"))
    return [Theme(name=name, **spec) for name, spec in data["theme"].items()]
