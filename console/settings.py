"""The operator's own settings (the theme), in $XDG_CONFIG_HOME/agentdeck/config.toml.

Room settings live in the room's agentdeck.toml; this file is about the person at the
keyboard, so it follows them from room to room.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import themes
from engine.io.files import replace_file


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "agentdeck" / "config.toml"


# A TOML string on one line: basic ("…", with escapes) or literal ('…').
ONE_LINE_STRING = r'"(?:[^"\\\n]|\\.)*"' + r"|'[^'\n]*'"


def _parse(text: str, path: Path) -> dict[str, Any]:
    """`text` as TOML, or ValueError saying what is wrong with the file at `path`."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML ({exc})") from exc
    except RecursionError as exc:  # tomllib recurses into nested arrays and tables
        raise ValueError(f"{path} is nested too deeply to read") from exc


def load(path: Path | None = None) -> dict[str, object]:
    """The settings, or {} when the file is missing or unreadable (never fatal)."""
    path = path or config_path()
    try:
        return _parse(path.read_text("utf-8-sig"), path)
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError too
        return {}


def save(values: dict[str, str], path: Path | None = None) -> None:
    """Set top-level string `values` in the file and change nothing else in it: other keys
    and tables, comments (one after the value too), indentation, line ends, a BOM; a
    symlink stays one, with its target's mode. A file this cannot read, or change so, is
    left untouched: ValueError saying why (it may hold the operator's hand-written
    settings); OSError when it cannot be written."""
    path = path or config_path()
    try:
        raw = path.read_bytes()  # bytes: read_text would turn \r\n into \n
    except FileNotFoundError:
        raw = b""
    bom = "\ufeff" if raw.startswith(codecs.BOM_UTF8) else ""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text; left as it is") from exc
    current = _parse(text, path)
    lines = text.split("\n")  # only \n: TOML allows other line separators inside comments
    end = "\r" if lines[0].endswith("\r") else ""
    for key, value in values.items():
        assigns = re.compile(rf"(\s*{re.escape(key)}\s*=\s*)({ONE_LINE_STRING})?(.*)$")
        at = next((i for i, old in enumerate(lines) if assigns.match(old)), None)
        if key in current and at is not None:
            head, _, tail = assigns.match(lines[at]).groups()  # type: ignore[union-attr]
            lines[at] = head + json.dumps(value) + tail
        else:
            lines.insert(0, f"{key} = {json.dumps(value)}{end}")  # line 0: top-level, and
            # inside no multi-line value
    text = "\n".join(lines) + ("" if lines[-1] == "" else "\n")
    try:  # a key written another way (quoted, say) is not found above, and two would clash
        ok = all(_parse(text, path).get(k) == v for k, v in values.items())
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{path}: could not set {', '.join(values)} in it; left as it is")
    real = path.resolve()  # a config kept in a dotfiles repository is often a symlink
    real.parent.mkdir(parents=True, exist_ok=True)
    replace_file(real, (bom + text).encode("utf-8"))


def use_themes(app: Any) -> None:
    """Register agentdeck's themes on `app` and apply the operator's saved choice (the dark
    theme when none is saved, or the saved one is gone)."""
    for theme in themes.load_themes():
        app.register_theme(theme)
    saved = load().get("theme")
    app.theme = saved if isinstance(saved, str) and saved in app.available_themes else themes.DARK


def state_variables(app: Any) -> dict[str, str]:
    """The variables a theme lacks (Textual's built-ins) from its base colours, the states'
    and the borders' and selection's (`themes.visible_defaults`): what an app's
    `get_theme_variable_defaults` returns."""
    theme = app.current_theme
    base = theme.to_color_system().generate()
    states = {name: base[borrowed] for name, borrowed in themes.STATE_DEFAULTS.items()}
    if all(name in theme.variables for name in themes.VISIBLE):  # agentdeck's own
        return states
    return states | themes.visible_defaults(theme, base, app.ansi_theme)


def state_path() -> Path:
    """Where the console keeps what it remembers between runs (not settings):
    $XDG_STATE_HOME/agentdeck/console.json."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "agentdeck" / "console.json"


MAX_ROOMS_REMEMBERED = 200  # rooms whose last thread is kept (the oldest are forgotten)


def last_thread(room: Path, path: Path | None = None) -> str | None:
    """The thread this operator's console last showed in `room` (None: none yet)."""
    try:
        kept = json.loads((path or state_path()).read_text("utf-8"))
        value = kept.get("threads", {}).get(str(room.resolve()))
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def remember_thread(room: Path, thread_id: str, path: Path | None = None) -> None:
    """Keep `thread_id` as the one to open `room` on next time; never fatal."""
    path = path or state_path()
    try:
        try:
            kept = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            kept = {}
        threads = kept.get("threads") if isinstance(kept, dict) else None
        threads = dict(threads) if isinstance(threads, dict) else {}
        key = str(room.resolve())
        threads.pop(key, None)
        threads[key] = thread_id  # the newest last: the oldest are dropped first
        while len(threads) > MAX_ROOMS_REMEMBERED:
            threads.pop(next(iter(threads)))
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, json.dumps({"threads": threads}, indent=1).encode("utf-8"))
    except OSError:
        pass  # the operator's disk: forgetting the thread costs a key next time, nothing more
