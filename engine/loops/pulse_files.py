"""Reading the room files the pulse loop watches: tasks/, chores/ and will.md.

Parsing is kept apart from firing so that one bad file becomes one `Malformed` entry (file,
revision, reason) instead of an exception: the loop reports it and goes on with the rest.
Every file's revision is the sha256 of its raw bytes (front matter included), so any edit,
even of a setting, is a new revision.

Task (`tasks/<name>.md` or `.txt`; `.md` wins if both exist):

    ---
    enabled: true        # false: the task does not fire
    strategy: react      # -> message.meta["strategy"]
    group: research      # -> message.meta["group"] (a configured thread group)
    ---
    The body is the task text.

Chore (`chores/<file>.toml`), exactly one of every / cron / rrule:

    key = "digest"                  # optional, defaults to the file stem
    text = "Summarise the inbox."   # required
    every = "15m"                   # s, m, h, d; "1h30m"; or a number of seconds
    cron = "*/5 * * * *"            # five fields
    rrule = "FREQ=DAILY;BYHOUR=9"   # RFC 5545, no DTSTART
    tz = "Europe/Berlin"            # optional zone for cron/rrule, default UTC
    enabled = true                  # optional
    strategy = "direct"             # optional -> meta["strategy"]
    group = "chore"                 # optional -> meta["group"]

Will (`will.md`): the whole file is the text; it must not be empty.

Each kind has a size limit (`Limits`, from `[pulse]` in agentdeck.toml). A file over it is
reported and not read: at most limit + 1 bytes of any file are ever in memory, and what a
turn, its request and its events copy is bounded by it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import PulseConfig
from engine.loops.pulse_schedule import Schedule, ScheduleError, make_schedule, parse_zone

TASK_SUFFIXES = (".md", ".txt")
TASK_SETTINGS = ("enabled", "strategy", "group")
CHORE_KEYS = ("key", "text", "every", "cron", "rrule", "tz", "enabled", "strategy", "group")
_SETTING = re.compile(r"[A-Za-z_][\w-]*")


class FileError(ValueError):
    """A watched file that cannot be used; the text is the reason shown to the operator."""


_DEFAULT = PulseConfig()


@dataclass(frozen=True)
class Limits:
    """The most bytes a task, chore or will file may have; a larger one is not read."""

    task: int = _DEFAULT.max_task_bytes
    chore: int = _DEFAULT.max_chore_bytes
    will: int = _DEFAULT.max_will_bytes

    @classmethod
    def of(cls, config: PulseConfig) -> Limits:
        return cls(config.max_task_bytes, config.max_chore_bytes, config.max_will_bytes)


@dataclass(frozen=True)
class Malformed:
    path: Path
    revision: str  # sha256 of the bytes, or the read error: a report is made once per value
    reason: str


@dataclass(frozen=True)
class TaskFile:
    name: str
    path: Path
    text: str
    revision: str
    enabled: bool
    settings: dict[str, str]  # strategy, group


@dataclass(frozen=True)
class ChoreFile:
    key: str
    path: Path
    text: str
    schedule: Schedule
    enabled: bool
    settings: dict[str, Any]


@dataclass(frozen=True)
class WillFile:
    path: Path
    text: str
    revision: str


@dataclass
class Scan:
    """One look at the room. `task_names` and `chore_files` include malformed files."""

    tasks: list[TaskFile] = field(default_factory=list)
    task_names: set[str] = field(default_factory=set)
    chores: list[ChoreFile] = field(default_factory=list)
    bad_chore_files: set[Path] = field(default_factory=set)
    will: WillFile | None = None
    will_exists: bool = False
    unreadable: set[Path] = field(default_factory=set)
    malformed: list[Malformed] = field(default_factory=list)


def revision(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """`---` fenced `key: value` lines at the very top, and the body after them."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise FileError("front matter opened with '---' on line 1 is never closed")
    settings: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = (part.strip() for part in stripped.partition(":"))
        if not sep or not _SETTING.fullmatch(key):
            raise FileError(f"front matter line {number}: expected 'key: value', got {stripped!r}")
        if key in settings:
            raise FileError(f"front matter line {number}: {key!r} is set twice")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        settings[key] = value
    return settings, "".join(lines[end + 1 :])


def parse_task(name: str, path: Path, raw: bytes) -> TaskFile:
    settings, body = split_front_matter(decode(raw))
    unknown = sorted(set(settings) - set(TASK_SETTINGS))
    if unknown:
        raise FileError(f"unknown setting {unknown[0]!r} (known: {', '.join(TASK_SETTINGS)})")
    enabled = settings.pop("enabled", "true").lower()
    if enabled not in ("true", "false"):
        raise FileError(f"enabled: expected true or false, got {enabled!r}")
    for key, value in settings.items():
        if not value:
            raise FileError(f"{key}: must not be empty")
    if not body.strip():
        raise FileError("missing text: the task body is empty")
    return TaskFile(name, path, body.strip(), revision(raw), enabled == "true", settings)


def parse_chore(path: Path, raw: bytes, now: float) -> ChoreFile:
    """The chore in `raw`; its schedule must have an occurrence after `now`'s midnight."""
    source = decode(raw)  # (its FileError is a ValueError: not inside the try below)
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise FileError(f"bad TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise FileError("bad TOML: nested too deeply") from None
    except ValueError:  # tomllib's int() of an integer longer than Python converts
        digits = sys.get_int_max_str_digits()
        raise FileError(f"bad TOML: a number has more than {digits} digits") from None
    unknown = sorted(set(data) - set(CHORE_KEYS))
    if unknown:
        raise FileError(f"unknown key {unknown[0]!r} (known: {', '.join(CHORE_KEYS)})")
    key = data.get("key", path.stem)
    if not isinstance(key, str) or not key.strip():
        raise FileError(f"key: expected a non-empty string, got {key!r}")
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise FileError('missing text: set text = "..."')
    kinds = [kind for kind in ("every", "cron", "rrule") if kind in data]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else "found none"
        raise FileError(f"schedule: set exactly one of every, cron, rrule ({found})")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise FileError(f"enabled: expected true or false, got {enabled!r}")
    settings: dict[str, Any] = {k: data[k] for k in ("strategy", "group") if k in data}
    for name, value in settings.items():
        if not isinstance(value, str) or not value:
            raise FileError(f"{name}: expected a non-empty string, got {value!r}")
    try:
        zone = parse_zone(data["tz"]) if "tz" in data else parse_zone("UTC")
        schedule = make_schedule(kinds[0], data[kinds[0]], zone, now=now)
    except ScheduleError as exc:
        raise FileError(str(exc)) from None
    return ChoreFile(key.strip(), path, text.strip(), schedule, enabled, settings)


def _read(path: Path, scan: Scan, limit: int, setting: str) -> bytes | None:
    """The file's bytes; None if it vanished meanwhile, or cannot be read or is larger than
    `limit` (then reported, and kept in `scan.unreadable`). Reads at most `limit` + 1 bytes,
    does not block on a FIFO or device put where the file was, and follows no symbolic link
    (`tasks/shadow.md` -> /etc/shadow would make a turn of that file), in the file's name or
    in its folder's."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        if path.parent.name in ("tasks", "chores") and path.parent.is_symlink():
            raise OSError(errno.ELOOP, "its folder is a symbolic link")
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            scan.unreadable.add(path)
            scan.malformed.append(Malformed(path, "symlink", "a symbolic link: not read (put"
                                            " the file itself here)"))  # fmt: skip
            return None
        problem = (f"error:{exc}", f"cannot read: {exc}")
    else:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                problem = ("not-regular", "cannot read: not a regular file")
            elif info.st_size > limit or len(data := _read_up_to(fd, limit + 1)) > limit:
                problem = ("too-large", f"larger than {limit} bytes, not read (the limit is "
                                        f"[pulse] {setting} in agentdeck.toml)")  # fmt: skip
            else:
                return data
        except OSError as exc:
            problem = (f"error:{exc}", f"cannot read: {exc}")
        finally:
            os.close(fd)
    scan.unreadable.add(path)
    scan.malformed.append(Malformed(path, *problem))
    return None


def _read_up_to(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Visible regular files with one of `suffixes`, sorted (editor temp files are skipped)."""
    try:
        entries = sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [p for p in entries if p.suffix in suffixes and not p.name.startswith(".")
            and (p.is_symlink() or p.is_file())]  # a link is reported by _read, not read  # fmt: skip


def _unexpected(exc: Exception) -> str:
    return f"cannot be used: {type(exc).__name__}: {exc}"


def scan_room(root: Path, now: float, limits: Limits | None = None) -> Scan:
    """Read tasks/, chores/ and will.md under `root`; never raises for a bad file.

    Each file is parsed on its own: whatever one raises makes it one `Malformed` entry (a
    parser's RecursionError too), so one file can never stop the others from firing.
    """
    limits = limits or Limits()
    scan = Scan()
    used: dict[str, Path] = {}
    for path in sorted(_files(root / "tasks", TASK_SUFFIXES), key=lambda p: (p.stem, p.suffix)):
        if path.stem in used:
            reason = f"duplicate task name {path.stem!r} ({used[path.stem].name} is used)"
            scan.malformed.append(Malformed(path, "duplicate", reason))
            continue
        if (raw := _read(path, scan, limits.task, "max_task_bytes")) is None:
            if path in scan.unreadable:  # still there: keep what pulse.json knows of it
                used[path.stem] = path
                scan.task_names.add(path.stem)
            continue
        used[path.stem] = path
        scan.task_names.add(path.stem)
        try:
            scan.tasks.append(parse_task(path.stem, path, raw))
        except FileError as exc:
            scan.malformed.append(Malformed(path, revision(raw), str(exc)))
        except Exception as exc:
            scan.malformed.append(Malformed(path, revision(raw), _unexpected(exc)))
    keys: dict[str, Path] = {}
    for path in _files(root / "chores", (".toml",)):
        if (raw := _read(path, scan, limits.chore, "max_chore_bytes")) is None:
            if path in scan.unreadable:
                scan.bad_chore_files.add(path)
            continue
        try:
            chore = parse_chore(path, raw, now)
            if chore.key in keys:
                raise FileError(f"duplicate key {chore.key!r} (also in {keys[chore.key].name})")
        except Exception as exc:
            scan.bad_chore_files.add(path)
            reason = str(exc) if isinstance(exc, FileError) else _unexpected(exc)
            scan.malformed.append(Malformed(path, revision(raw), reason))
            continue
        keys[chore.key] = path
        scan.chores.append(chore)
    will = root / "will.md"
    will_there = will.is_symlink() or will.is_file()
    raw = _read(will, scan, limits.will, "max_will_bytes") if will_there else None
    scan.will_exists = raw is not None or will in scan.unreadable
    if raw is not None:
        try:
            text = decode(raw)
            if not text.strip():
                raise FileError("missing text: will.md is empty (delete it to have no will)")
            scan.will = WillFile(will, text.strip(), revision(raw))
        except FileError as exc:
            scan.malformed.append(Malformed(will, revision(raw), str(exc)))
    return scan
