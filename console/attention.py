"""Asking for the operator's attention when calls start waiting for a decision.

The terminal bell (App.bell), unless agentdeck.toml's `[console] bell = false`; and,
where the terminal shows them, a desktop notification written as an escape sequence:
OSC 9 (`ESC ] 9 ; text BEL`: iTerm2, WezTerm, kitty, Ghostty, Windows Terminal) or OSC 777
(`ESC ] 777 ; notify ; title ; body BEL`: foot, rxvt-unicode, VTE terminals that carry
the patch). `desktop_notify = "auto"` picks one from the environment, and none where it
cannot tell (inside tmux or screen the outer terminal is unknown). Both go through
Textual's driver, as Textual's own bell and clipboard (OSC 52) do, so they reach the
terminal in order with the frames and never in the middle of one.

The screen calls `calls_waiting` once per redraw that found new waiting calls, and this
rings at most once per GAP seconds: a burst of fifty calls is one bell, not fifty.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from engine.config import ConfigError, ConsoleConfig, load_config

Notify = Literal["osc9", "osc777", "off"]
GAP = 2.0  # seconds: new waiting calls within this time of the last ring ring no more
_OSC9_PROGRAMS = frozenset({"iTerm.app", "WezTerm", "ghostty"})  # TERM_PROGRAM values
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def pick_notify(setting: str, env: Mapping[str, str]) -> Notify:
    """The notification to write for `desktop_notify = setting` in the terminal `env`
    describes ("off" where it cannot tell)."""
    if setting in ("osc9", "osc777", "off"):
        return setting  # type: ignore[return-value]
    term, program = env.get("TERM", ""), env.get("TERM_PROGRAM", "")
    if env.get("TMUX") or env.get("STY") or term.startswith(("screen", "tmux")):
        return "off"
    if (program in _OSC9_PROGRAMS or term in ("xterm-kitty", "xterm-ghostty")
            or env.get("KITTY_WINDOW_ID") or env.get("WT_SESSION")):  # fmt: skip
        return "osc9"
    if term.startswith(("foot", "rxvt")) or env.get("VTE_VERSION"):
        return "osc777"
    return "off"


def sequence(kind: Notify, title: str, body: str) -> str:
    """The escape sequence of a desktop notification ("" for "off"). Control characters
    are dropped from the text (one would end the sequence early), and `;` from an OSC 777
    title (it separates the title from the body)."""
    title, body = _CONTROL.sub("", title), _CONTROL.sub("", body)
    if kind == "osc9":
        return f"\x1b]9;{title}: {body}\x07"
    if kind == "osc777":
        return f"\x1b]777;notify;{title.replace(';', ',')};{body}\x07"
    return ""


class Attention:
    """Bell and desktop notification for calls that start waiting."""

    def __init__(self, config: ConsoleConfig | None = None, *,
                 env: Mapping[str, str] = os.environ,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        config = config or ConsoleConfig()
        self.bell = config.bell
        self.notify = pick_notify(config.desktop_notify, env)
        self._clock = clock
        self._last = float("-inf")

    @classmethod
    def of_room(cls, path: Path, **kw: Any) -> Attention:
        """As the room's agentdeck.toml `[console]` says (defaults when it cannot be read:
        the runtime says what is wrong with it)."""
        try:
            config = load_config(path).console
        except ConfigError:
            config = ConsoleConfig()
        return cls(config, **kw)

    def calls_waiting(self, app: Any, count: int, what: str) -> bool:
        """`count` calls started waiting (`what`: which): ring and notify, unless it was
        done within GAP seconds. True if it was done now."""
        now = self._clock()
        if now - self._last < GAP:
            return False
        self._last = now
        if self.bell:
            app.bell()
        plural = "s" if count > 1 else ""
        text = sequence(self.notify, "agentdeck", f"{count} call{plural} waiting: {what}")
        driver = getattr(app, "_driver", None)  # as App.bell and copy_to_clipboard write
        if text and driver is not None and not app.is_headless:
            driver.write(text)
        return True
