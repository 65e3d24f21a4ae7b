"""tasks/, chores/ and will.md: any files are read without an exception or a hang, each bad
one is reported once, and the good ones beside them still fire."""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from hypothesis import event, example, given
from hypothesis import strategies as st

from engine.config import Config
from engine.domain.events import Notice
from engine.domain.messages import Message
from engine.loops.pulse import PulseLoop
from engine.loops.pulse_files import scan_room
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from tests.fuzz.rooms import ROOMY, integrity, scratch, within
from tests.fuzz.values import Raw, mangled, texts, toml_document, toml_values
from tests.helpers import on
from tests.wait import PATIENCE, until

T0 = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
TICKS = (T0, T0 + 61, T0 + 122)  # the good chore (every minute) is first due at the second
BOUND = 60.0  # seconds three ticks may take; every schedule computation has its own bound
GOOD_TASK, GOOD_CHORE = "zz-good-task", "zz-good-chore"  # "zz-": no generated name has it

# -- what a room holds ----------------------------------------------------------------------

RRULE_PARTS = st.sampled_from(["FREQ", "INTERVAL", "COUNT", "UNTIL", "BYSECOND", "BYMINUTE",
                               "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO",
                               "BYMONTH", "BYSETPOS", "WKST", "DTSTART", "X"])  # fmt: skip
RRULE_VALUES = st.sampled_from(["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY",
                                "YEARLY", "0", "1", "-1", "2", "25", "30", "31", "53", "60",
                                "366", "-366", "9" * 30, "MO", "-1FR", "+2TU", "MO,WE", "1,2",
                                "20240101T000000Z", "", "x"])  # fmt: skip
rrules = st.lists(st.tuples(RRULE_PARTS, RRULE_VALUES), min_size=1, max_size=5).map(
    lambda parts: ";".join(f"{k}={v}" for k, v in parts)
) | st.sampled_from([
    "FREQ=SECONDLY;INTERVAL=0",  # issue 13: minutes on the event loop
    "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",  # issue 13: 14 s at each start
    "FREQ=SECONDLY;BYHOUR=25", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=MINUTELY;BYHOUR=9",
    "FREQ=DAILY;COUNT=1", "FREQ=MONTHLY;BYMONTHDAY=31", "FREQ=WEEKLY;BYDAY=MO;BYSETPOS=-1",
    "RRULE:FREQ=HOURLY", "FREQ=YEARLY;BYWEEKNO=53;BYDAY=SU", "FREQ=DAILY\nRDATE:20240101",
])  # fmt: skip
# Rules RFC 5545 allows, combined at random: many match rarely or never (February 30th,
# week 53 on a Sunday), which is what the search bound is for.
BY_VALID = {"BYSECOND": st.integers(0, 59), "BYMINUTE": st.integers(0, 59),
            "BYHOUR": st.integers(0, 23), "BYMONTHDAY": st.integers(-31, 31).filter(bool),
            "BYMONTH": st.integers(1, 12), "BYYEARDAY": st.integers(-366, 366).filter(bool),
            "BYWEEKNO": st.integers(-53, 53).filter(bool),
            "BYSETPOS": st.integers(-366, 366).filter(bool),
            "BYDAY": st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU", "-1FR", "2TU"]),
            "INTERVAL": st.integers(1, 1000), "COUNT": st.integers(1, 5)}  # fmt: skip
valid_rrules = st.tuples(
    st.sampled_from(["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]),
    st.dictionaries(st.sampled_from(list(BY_VALID)), st.none(), max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({k: BY_VALID[k] for k in keys})
    ),
).map(lambda r: ";".join([f"FREQ={r[0]}", *(f"{k}={v}" for k, v in r[1].items())]))
crons = st.sampled_from([
    "* * * * *", "*/0 * * * *", "0 0 30 2 *", "61 * * * *", "@reboot", "@daily",
    "* * * * * *", "0 0 31 2,4,6 *", "0 9 * * 1-5", "0 0 29 2 1", "L * * * *", "0 0 L * *",
    "0 0 * * 5#5", "", "*/7 */3 * * *",
]) | st.text(alphabet="0123456789*/,-LW#? ", max_size=20)  # fmt: skip
every_texts = st.sampled_from(["15m", "1h30m", "0s", "1ms", "0.001s", "1e400", "-1m", "1m 1m",
                               "9999999999d", "m", "", "36500d", "36600d", "90s", "2d"])  # fmt: skip
everys = every_texts | st.sampled_from([0, -1, 1e-9, 1e300, float("nan"), float("inf"), 2**70,
                                        True]) | toml_values  # fmt: skip
zone_texts = st.sampled_from(["UTC", "utc", "Europe/Berlin", "America/St_Johns", "Nope/Zone", "",
                              "Australia/Lord_Howe", "Pacific/Chatham", "../../etc/passwd",
                              "/etc/localtime", "Etc/GMT+12", "posix/Europe/Paris"])  # fmt: skip
zones = zone_texts | toml_values
CHORE_FIELDS = {"key": texts | toml_values, "text": texts | toml_values,
                "every": everys, "cron": crons | toml_values, "rrule": rrules | toml_values,
                "tz": zones, "enabled": st.booleans() | toml_values,
                "strategy": st.sampled_from(["react", "direct"]) | toml_values,
                "group": st.sampled_from(["chore", "task", "nope"]) | toml_values}  # fmt: skip


@st.composite
def chore_files(draw: st.DrawFn) -> bytes:
    """A chore file: often a well-formed one with a schedule that may never match, else the
    keys a chore has with plausible or wild values, maybe mangled."""
    if draw(st.integers(0, 3)):
        data: dict[str, Any] = {"text": "Do the thing."}
        kind = draw(st.sampled_from(["every", "cron", "rrule"]))
        data[kind] = draw({"every": every_texts, "cron": crons,
                           "rrule": valid_rrules | rrules}[kind])  # fmt: skip
        if draw(st.booleans()):
            data["tz"] = draw(zone_texts)
        return toml_document(data).encode("utf-8", "surrogatepass")
    data = {"text": draw(texts | st.just("Do the thing."))}
    data[draw(st.sampled_from(["every", "cron", "rrule"]))] = None  # one schedule, usually
    for name in draw(st.lists(st.sampled_from(list(CHORE_FIELDS)), max_size=4)):
        data[name] = None
    data = {k: draw(CHORE_FIELDS[k]) if v is None else v for k, v in data.items()}
    data |= draw(st.dictionaries(texts, toml_values, max_size=1))  # an unknown key, sometimes
    text = toml_document(data)
    return draw(st.just(text) | mangled(st.just(text))).encode("utf-8", "surrogatepass")


FRONT = st.sampled_from(["enabled: true", "enabled: false", "enabled: maybe", "strategy: react",
                         "group: task", "group:", "bogus: 1", "enabled: true\nenabled: false",
                         "# a comment", "no colon", ": empty key", "strategy: 'direct'"])  # fmt: skip


@st.composite
def task_files(draw: st.DrawFn) -> bytes:
    """A task file: front matter (closed or not) and a body, or any bytes at all."""
    front = "\n".join(draw(st.lists(FRONT, max_size=3)))
    close = draw(st.sampled_from(["---\n", "", "--- \n", "----\n"]))
    body = draw(texts | st.text(max_size=200) | st.just("Write the report."))
    text = f"---\n{front}\n{close}{body}" if draw(st.booleans()) else body
    raw = text.encode("utf-8", "surrogatepass")
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    return draw(st.just(bom + raw) | st.binary(max_size=100))


# File names: ordinary, unicode, editor temp files, and bytes that are not UTF-8 (which
# Python spells with lone surrogates).
names = st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]),
                min_size=1, max_size=30).filter(lambda n: n not in (".", "..")) | st.sampled_from(
    [".hidden", "#auto#", "a b", "ü", "🦜", os.fsdecode(b"\xff\xfe"), "x" * 200]
).filter(lambda n: not n.startswith("zz-"))  # fmt: skip


@st.composite
def rooms(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "tasks": draw(st.dictionaries(names, task_files(), max_size=4)),
        "task_suffix": draw(st.sampled_from([".md", ".txt"])),
        "chores": draw(st.dictionaries(names, chore_files(), min_size=1, max_size=5)),
        "will": draw(st.none() | task_files()),
        "pulse_json": draw(st.none() | st.binary(max_size=40) | st.just(b'{"version": 1}')
                           | st.just(b'{"version": 1, "tasks": [], "chores": 5, "will": 1}')),
        "special": draw(st.lists(st.sampled_from(["dir", "fifo", "loop", "link"]), max_size=2,
                                 unique=True)),
    }  # fmt: skip


def lay_out(root: Path, room: dict[str, Any]) -> None:
    """Write the generated files (and the good ones) into the room at `root`."""
    (root / "tasks").mkdir()
    (root / "chores").mkdir()
    for name, raw in room["tasks"].items():
        _write(root / "tasks" / (name + room["task_suffix"]), raw)
    for name, raw in room["chores"].items():
        _write(root / "chores" / (name + ".toml"), raw)
    if room["will"] is not None:
        (root / "will.md").write_bytes(room["will"])
    if room["pulse_json"] is not None:
        (root / "pulse.json").write_bytes(room["pulse_json"])
    for kind in room["special"]:
        where = root / "tasks" / f"zz-special-{kind}.md"
        if kind == "dir":
            where.mkdir(exist_ok=True)
        elif kind == "fifo":
            os.mkfifo(root / "chores" / "zz-special-fifo.toml")
        elif kind == "loop":
            where.symlink_to(where)
        else:
            where.symlink_to(root / "will.md")
    (root / "tasks" / f"{GOOD_TASK}.md").write_text("---\nenabled: true\n---\nWrite it.\n")
    (root / "chores" / f"{GOOD_CHORE}.toml").write_text('text = "Tidy."\nevery = "1m"\n')


def _write(path: Path, raw: bytes) -> None:
    try:
        path.write_bytes(raw)
    except OSError:  # a name too long for the file system: not this test's subject
        pass


# -- the properties -------------------------------------------------------------------------


@ROOMY
@given(rooms())
def test_scan_room_never_raises_and_keeps_the_good_files(room: dict[str, Any]) -> None:
    with scratch() as root:
        lay_out(root, room)
        scan = within(BOUND, lambda: scan_room(root, T0))
        event(f"generated chores that read well: {len(scan.chores) - 1}")
        for chore in scan.chores:
            event(f"a good chore's schedule: {chore.schedule.kind}")
        assert GOOD_TASK in {t.name for t in scan.tasks}
        assert GOOD_CHORE in {c.key for c in scan.chores}
        assert all(bad.reason and "\n" not in bad.reason for bad in scan.malformed), [
            bad.reason for bad in scan.malformed if "\n" in bad.reason]  # fmt: skip


class Rig:
    """A PulseLoop over a recording submit (which stores the message as the runtime would)
    and a recording notice, with a fake clock."""

    def __init__(self, root: Path) -> None:
        self.now = TICKS[0]
        self.submitted: list[tuple[float, Message]] = []
        self.notices: list[tuple[str, str]] = []
        self.keys: set[str] = set()
        self.loop = PulseLoop(Room(root), self.submit, self.notice, clock=lambda: self.now)

    async def submit(self, message: Message, *, key: str, overflow: bool = True) -> None:
        message.model_dump_json()  # what the runtime commits with the request
        if key not in self.keys:
            self.keys.add(key)
            self.submitted.append((self.now, message))

    def notice(self, level: str, text: str) -> None:
        self.notices.append((level, text))

    def ticks(self) -> None:
        async def go() -> None:
            for now in TICKS:
                self.now = now
                await self.loop.tick()

        anyio.run(go)


@ROOMY
@given(rooms())
@example(
    {
        "tasks": {},
        "task_suffix": ".md",
        "chores": {
            "interval-0": b'text = "x"\nrrule = "FREQ=SECONDLY;INTERVAL=0"\n',
            "feb-30": b'text = "x"\nrrule = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30"\n',
            "deep": b'text = "x"\nevery = "1m"\ny = ' + b"[" * 3000 + b"]" * 3000 + b"\n",
            "huge": b'text = "x"\nevery = ' + Raw("9" * 5000).encode() + b"\n",
        },
        "will": b"Be kind.",
        "pulse_json": None,
        "special": [],
    }
)  # issue 13, items 1 and 2
def test_ticks_report_each_bad_file_once_and_the_good_ones_fire(room: dict[str, Any]) -> None:
    with scratch() as root:
        lay_out(root, room)
        rig = Rig(root)
        within(BOUND, rig.ticks)
        fired = Counter(m.thread_id for _, m in rig.submitted)
        assert fired[f"task:{GOOD_TASK}"] == 1, fired
        first = min(t for t, m in rig.submitted if m.thread_id == f"chore:{GOOD_CHORE}")
        assert first == TICKS[1]
        said = Counter(rig.notices)
        assert not [n for n, k in said.items() if k > 1], said  # each said once
        # One line each, but for a file name that holds a line break (said as it is).
        paths = sorted((str(p) for d in ("tasks", "chores") for p in (root / d).iterdir()),
                       key=len, reverse=True)  # fmt: skip
        for _, text in rig.notices:
            assert "tick failed" not in text, text
            assert "\n" not in functools.reduce(lambda t, p: t.replace(p, "PATH"), paths, text)
        scan = scan_room(root, TICKS[-1])
        for bad in scan.malformed:  # each bad file is among what was said
            assert any(text.startswith(f"{bad.path}: ") for _, text in rig.notices), bad
        json.loads((root / "pulse.json").read_text())  # what the next start reads


def test_a_task_file_named_with_a_byte_not_utf8_does_not_end_the_runtime(tmp_path: Path) -> None:
    # Found from here: with the real runtime, the pulse loop's notice about such a file (its
    # name has a lone surrogate in Python) was stored with the next commit, which failed
    # and ended the runtime; and the runtime's scheduler admitted the file's request before
    # SQLite refused it, so its turn failed to start in the runtime's task group too.
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    (room / "tasks" / os.fsdecode(b"bad\xff.md")).write_text("calc 1+1")
    (room / "tasks" / os.fsdecode(b"worse\xfe.md")).write_text("---\nbogus: 1\n---\nx")
    (room / "tasks" / "good.md").write_text("calc 2+2")
    config = Config.model_validate({"pulse": {"interval": 0.05}})
    said: list[str] = []

    async def done(rt: Runtime, task: str) -> list:
        return await on(rt.store).fetchall(
            "SELECT 1 FROM turns WHERE thread_id=? AND status='done'", (f"task:{task}",))  # fmt: skip

    async def go() -> str:
        with anyio.fail_after(4 * PATIENCE):  # a hang of the runtime's start or stop
            async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0),
                                    config=config) as rt:  # fmt: skip
                rt.subscribe(lambda e: said.append(e.text) if isinstance(e, Notice) else None)
                start_loops(rt)
                await until(lambda: done(rt, "good"), "the good task done", seen=lambda: said)
                await until(lambda: said, "both bad files said", ok=lambda s: len(s) >= 2)
                for i in range(3):  # a few more ticks past the bad files: nothing is said twice
                    (room / "tasks" / f"later-{i}.md").write_text(f"calc {i}+1")
                    await until(functools.partial(done, rt, f"later-{i}"),
                                f"the pulse ticked again ({i + 1})", seen=lambda: said)  # fmt: skip
        return integrity(room / "execution.db")

    assert anyio.run(go) == "ok"
    assert sorted(said) == sorted(set(said)) and len(said) == 2, said
    assert any("task:bad\\udcff" in text and "cannot be stored" in text for text in said), said
    assert any("worse\\udcfe.md: unknown setting 'bogus'" in text for text in said), said
