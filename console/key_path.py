"""A key bound on the main screen acts when it reaches the app, not after a tour of its
widget tree.

Textual hands a key from the app to the focused widget's queue, and from there, when the
widget does nothing with it, to its parent's queue, one level at a time, until it is back
at the app, which then looks up the bindings. Each of those steps waits for its turn on
the event loop: in a flood of runtime events, behind a frame being drawn or events being
folded, so a key's action waited for five or six such turns. Where the focused widget and
every container above it do nothing with a key but let it pass (no `on_key`, no `key_*`
method, no handler of `events.Key`: the panes, the queue, the tables), that tour changes
nothing, so the app looks the bindings up at once, as it would at the end of it. Anything
else (an input, the decision card, a dialog) takes Textual's own path.
"""

from __future__ import annotations

import functools
from typing import Any

from textual import events
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget


@functools.cache
def lets_keys_pass(cls: type[DOMNode]) -> bool:
    """Whether a widget of `cls` does nothing with a key but pass it to its parent."""
    return (
        getattr(cls, "_on_key", Widget._on_key) is Widget._on_key
        and not hasattr(cls, "on_key")
        and not any(name.startswith("key_") for name in dir(cls))
        and not cls._decorated_handlers.get(events.Key)
    )


def passes_through(widget: Widget | None, screen: Screen[Any]) -> bool:
    """Whether a key sent to `widget` would reach the app untouched: it and each of its
    containers below `screen` let keys pass."""
    node: DOMNode | None = widget
    if node is None:
        return False
    while node is not None and node is not screen:
        if not lets_keys_pass(type(node)):
            return False
        node = node.parent
    return node is screen
