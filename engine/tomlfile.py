"""Reading agentdeck.toml as data, with a clear error for a file that is not TOML.

Apart from engine/config.py (which validates it) so a command that only needs to know
whether a section is there (the store's URL) reads it without loading pydantic.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """agentdeck.toml could not be read; the text names the file and the problem."""


def read_toml(path: Path, error: type[ValueError] = ConfigError) -> dict[str, Any]:
    """`path` as data (a missing file: {}), or `error` saying why it cannot be read."""
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise error(f"{path}: not valid TOML: nested too deeply") from None
    except ValueError:  # tomllib's int() of an integer longer than Python converts
        digits = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise error(f"{path}: not valid TOML: {digits}") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}") from None
