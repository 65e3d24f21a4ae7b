"""The operator's own settings (the theme), in $XDG_CONFIG_HOME/agentdeck/config.toml.

Room settings live in the room's agentdeck.toml; this file is about the person at the
keyboard, so it follows them from room to room.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import themes


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "agentdeck" / "config.toml"


def load(path: Path | None = None) -> dict[str, object]:
    """The settings, or {} when the file is missing or unreadable (never fatal)."""
    path = path or config_path()
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def save(values: dict[str, str], path: Path | None = None) -> None:
    """Set top-level string `values` in the file, keeping the rest of it as it is (other
    keys, tables, comments). A file that is not valid TOML is left untouched: ValueError,
    saying where; it may hold the operator's hand-written settings."""
    path = path or config_path()
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        text = ""
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text; left as it is") from exc
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML ({exc}); left as it is") from exc
    lines = text.splitlines()
    top = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    for key, value in values.items():
        line = f"{key} = {json.dumps(value)}"
        assigns = re.compile(rf"\s*{re.escape(key)}\s*=")
        at = next((i for i in range(top) if assigns.match(lines[i])), None)
        if at is None:
            lines.insert(top, line)
            top += 1
        else:
            lines[at] = line
    text = "\n".join(lines) + "\n"
    try:  # a key written another way (quoted, say) is not found above, and two would clash
        ok = all(tomllib.loads(text).get(k) == v for k, v in values.items())
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise ValueError(f"{path}: could not set {', '.join(values)} in it; left as it is")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


def use_themes(app: Any) -> None:
    """Register agentdeck's themes on `app` and apply the operator's saved choice (the dark
    theme when none is saved, or the saved one is gone)."""
    for theme in themes.load_themes():
        app.register_theme(theme)
    saved = load().get("theme")
    app.theme = saved if isinstance(saved, str) and saved in app.available_themes else themes.DARK


def state_variables(app: Any) -> dict[str, str]:
    """The state variables a theme lacks (Textual's built-ins), from its base colours: what
    an app's `get_theme_variable_defaults` returns."""
    base = app.current_theme.to_color_system().generate()
    return {name: base[borrowed] for name, borrowed in themes.STATE_DEFAULTS.items()}
