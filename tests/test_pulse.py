"""The pulse loop: room files become turn requests, each fired once, across restarts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.domain.messages import Message
from engine.loops.pulse import PulseLoop
from engine.loops.pulse_files import FileError, split_front_matter
from engine.loops.pulse_schedule import ScheduleError, parse_every
from engine.room import Room
from tests.helpers import room_rows
from tests.wait import PATIENCE

T0 = datetime(2024, 1, 1, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


class Rig:
    """A room on tmp_path, a fake clock, a recording submit and notice."""

    def __init__(self, path: Path) -> None:
        self.room = Room(path)
        self.now = T0
        self.submitted: list[Message] = []
        self.keys: set[str] = set()
        self.notices: list[tuple[str, str]] = []
        self.fail: BaseException | None = None

    def loop(self, **kw: object) -> PulseLoop:
        return PulseLoop(self.room, self.submit, self.notice, clock=lambda: self.now, **kw)  # type: ignore[arg-type]

    async def submit(self, message: Message, *, key: str, overflow: bool = True) -> None:
        """As the runtime's: a key it has seen makes no second request."""
        if self.fail is not None:
            raise self.fail
        if key not in self.keys:
            self.keys.add(key)
            self.submitted.append(message)

    def notice(self, level: str, text: str) -> None:
        self.notices.append((level, text))

    def write(self, rel: str, text: str | bytes) -> Path:
        path = self.room.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    def state(self) -> dict:
        return json.loads((self.room.path / "pulse.json").read_text())


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


async def test_task_fires_once_per_revision_and_again_when_edited(rig: Rig) -> None:
    rig.write("tasks/report.md", "---\nstrategy: plan_execute\n---\nWrite the report.\n")
    loop = rig.loop()
    [msg] = await loop.tick()
    assert (msg.origin, msg.sender, msg.channel) == ("task", "self", None)
    assert msg.thread_id == "task:report" and msg.text == "Write the report."
    rev = msg.meta["revision"]
    assert msg.meta == {"task": "report", "revision": rev, "strategy": "plan_execute"}
    assert rig.state()["tasks"]["report"]["revision"] == rev
    assert await loop.tick() == []
    rig.write("tasks/report.md", "---\nstrategy: plan_execute\n---\nWrite it shorter.\n")
    [again] = await loop.tick()
    assert again.meta["revision"] != rev and again.text == "Write it shorter."
    assert await loop.tick() == [] and len(rig.submitted) == 2


async def test_disabled_task_holds_and_deleted_task_is_forgotten(rig: Rig) -> None:
    path = rig.write("tasks/later.txt", "---\nenabled: false\n---\nNot yet.\n")
    loop = rig.loop()
    assert await loop.tick() == []
    rig.write("tasks/later.txt", "---\nenabled: true\n---\nNot yet.\n")
    assert [m.thread_id for m in await loop.tick()] == ["task:later"]
    path.unlink()
    assert await loop.tick() == [] and rig.state()["tasks"] == {}
    rig.write("tasks/later.txt", "---\nenabled: true\n---\nNot yet.\n")
    assert len(await loop.tick()) == 1  # the same text again is a new task


async def test_every_chore_first_fires_one_interval_after_first_sight(rig: Rig) -> None:
    rig.write(
        "chores/inbox.toml", 'text = "Check the inbox."\nevery = "15m"\nstrategy = "direct"\n'
    )
    loop = rig.loop()
    assert await loop.tick() == []
    rig.now = T0 + 15 * 60 - 1
    assert await loop.tick() == []
    rig.now = T0 + 15 * 60
    [msg] = await loop.tick()
    assert (msg.origin, msg.sender, msg.channel, msg.thread_id) == (
        "chore",
        "self",
        None,
        "chore:inbox",
    )
    assert msg.text == "Check the inbox."
    assert msg.meta == {"chore": "inbox", "occurrence": "2024-01-01T00:15:00+00:00", "missed": 0,
                        "schedule": "every 15m", "strategy": "direct"}  # fmt: skip
    rig.now += 60
    assert await loop.tick() == []
    rig.now = T0 + 30 * 60 + 5
    [msg] = await loop.tick()
    assert msg.meta["occurrence"] == "2024-01-01T00:30:00+00:00"


async def test_missed_occurrences_collapse_into_one_catch_up(rig: Rig) -> None:
    rig.write("chores/c.toml", 'key = "sweep"\ntext = "Sweep."\nevery = "15m"\n')
    loop = rig.loop()
    await loop.tick()
    rig.now = T0 + 65 * 60  # 00:15, 00:30, 00:45, 01:00 all fell due
    [msg] = await loop.tick()
    assert msg.thread_id == "chore:sweep"
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2024-01-01T01:00:00+00:00", 3)
    assert await loop.tick() == []
    rig.now = T0 + 75 * 60  # phase is kept: the next one is 01:15
    [msg] = await loop.tick()
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2024-01-01T01:15:00+00:00", 0)


async def test_cron_schedule(rig: Rig) -> None:
    rig.write("chores/five.toml", 'text = "Tick."\ncron = "*/5 * * * *"\n')
    rig.now = T0 + 60
    loop = rig.loop()
    assert await loop.tick() == []
    rig.now = T0 + 5 * 60
    [msg] = await loop.tick()
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2024-01-01T00:05:00+00:00", 0)
    rig.now = T0 + 21 * 60
    [msg] = await loop.tick()
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2024-01-01T00:20:00+00:00", 2)


async def test_rrule_schedule_counts_from_midnight_in_its_zone(rig: Rig) -> None:
    rig.write("chores/am.toml", 'text = "Plan the day."\nrrule = "FREQ=DAILY;BYHOUR=9"\n')
    rig.write(
        "chores/berlin.toml",
        'text = "Hallo."\nrrule = "FREQ=DAILY;BYHOUR=9"\ntz = "Europe/Berlin"\n',
    )
    rig.now = T0 + 3600 + 23.5  # first sight at 01:00:23.5 UTC
    loop = rig.loop()
    assert await loop.tick() == []
    rig.now = T0 + 8 * 3600  # 09:00 in Berlin (UTC+1 in winter)
    [msg] = await loop.tick()
    assert (msg.thread_id, msg.meta["occurrence"]) == ("chore:berlin", "2024-01-01T09:00:00+01:00")
    rig.now = T0 + 9 * 3600
    [msg] = await loop.tick()
    assert (msg.thread_id, msg.meta["occurrence"]) == ("chore:am", "2024-01-01T09:00:00+00:00")
    rig.now = T0 + 3 * 86400 + 10 * 3600  # two days later
    fired = {m.thread_id: m.meta["missed"] for m in await loop.tick()}
    assert fired == {"chore:am": 2, "chore:berlin": 2}


async def test_will_fires_on_change_and_at_interval(rig: Rig) -> None:
    rig.write("will.md", "Keep the garden tidy.\n")
    loop = rig.loop(will_interval=600, agent="bob")
    [msg] = await loop.tick()
    assert (msg.origin, msg.sender, msg.channel, msg.thread_id) == (
        "will",
        "self",
        None,
        "will:bob",
    )
    assert msg.text == "Keep the garden tidy." and msg.meta["why"] == "changed"
    rev = msg.meta["will_revision"]
    rig.now += 599
    assert await loop.tick() == []
    rig.now += 1
    [msg] = await loop.tick()
    assert msg.meta == {"will_revision": rev, "why": "interval"}
    rig.now += 10
    rig.write("will.md", "Keep the garden wild.\n")
    [msg] = await loop.tick()
    assert msg.meta["why"] == "changed" and msg.meta["will_revision"] != rev
    rig.now += 599  # the interval counts from the last will fire
    assert await loop.tick() == []


async def test_restart_neither_repeats_nor_loses_a_fire(rig: Rig) -> None:
    rig.write("tasks/t.md", "Do it.")
    rig.write("chores/c.toml", 'text = "Again."\nevery = "1h"\n')
    rig.write("will.md", "Be kind.")
    day = 86400
    first = rig.loop(will_interval=day)
    assert {m.origin for m in await first.tick()} == {"task", "will"}  # the chore is anchored
    again = rig.loop(will_interval=day)  # a restart: new instance, same room
    assert await again.tick() == []
    rig.now = T0 + 3600  # the occurrence falls due while nobody runs; the next run fires it
    [msg] = await rig.loop(will_interval=day).tick()
    assert msg.thread_id == "chore:c" and msg.meta["missed"] == 0
    assert await rig.loop(will_interval=day).tick() == []
    rig.now = T0 + day  # the will interval also counts across restarts
    fired = {m.thread_id: m.meta for m in await rig.loop(will_interval=day).tick()}
    assert fired["will:agent"]["why"] == "interval" and fired["chore:c"]["missed"] == 22


async def test_crash_inside_submit_leaves_the_fire_to_the_next_run(rig: Rig) -> None:
    class Crash(BaseException):
        pass

    rig.write("tasks/t.md", "Do it.")
    rig.fail = Crash()
    with pytest.raises(Crash):
        await rig.loop().tick()
    rig.fail = None
    [msg] = await rig.loop().tick()  # nothing was recorded, so nothing is lost
    assert msg.thread_id == "task:t"


async def test_malformed_files_are_reported_once_and_do_not_stop_the_rest(rig: Rig) -> None:
    bad = {
        "tasks/open.md": ("---\nstrategy: react\nNo closing fence.", "never closed"),
        "tasks/typo.md": ("---\nenable: false\n---\nOops.", "unknown setting 'enable'"),
        "tasks/empty.md": ("---\nenabled: true\n---\n\n", "missing text"),
        "chores/toml.toml": ('text = "x\nevery = 1', "bad TOML"),
        "chores/sched.toml": ('text = "x"\nevery = "soon"', "every: cannot read 'soon'"),
        "chores/cron.toml": ('text = "x"\ncron = "61 * * * *"', "cron: cannot read"),
        "chores/notext.toml": ('every = "1m"', "missing text"),
        "chores/two.toml": ('text = "x"\nevery = "1m"\ncron = "* * * * *"', "exactly one"),
        "will.md": (b"\xff\xfe bad bytes", "not UTF-8"),
    }
    for rel, (content, _) in bad.items():
        rig.write(rel, content)
    rig.write("tasks/good.md", "Fine.")
    rig.write("chores/good.toml", 'text = "Fine."\nevery = "1m"\n')
    loop = rig.loop()
    assert [m.thread_id for m in await loop.tick()] == ["task:good"]
    rig.now += 60
    assert [m.thread_id for m in await loop.tick()] == ["chore:good"]
    assert len(rig.notices) == len(bad)
    for rel, (_, reason) in bad.items():
        [hit] = [text for _, text in rig.notices if text.startswith(str(rig.room.path / rel))]
        assert reason in hit
    assert {level for level, _ in rig.notices} == {"warning"}
    rig.write("tasks/typo.md", "---\nenabled: false\n---\nOops.")  # fixed: no report
    rig.write("tasks/open.md", "---\nstrategy: react\nStill open.")  # new revision: reported
    await loop.tick()
    assert len(rig.notices) == len(bad) + 1 and "open.md" in rig.notices[-1][1]


async def test_malformed_chore_keeps_its_schedule_until_fixed(rig: Rig) -> None:
    path = rig.write("chores/c.toml", 'text = "x"\nevery = "10m"\n')
    loop = rig.loop()
    await loop.tick()
    path.write_text('text = "x"\nevery = "10m"\nbroken')
    rig.now = T0 + 25 * 60
    assert await loop.tick() == [] and "c" in rig.state()["chores"]
    path.write_text('text = "x"\nevery = "10m"\n')
    [msg] = await loop.tick()
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2024-01-01T00:20:00+00:00", 1)
    path.write_text('text = "x"\nevery = "10m"\nenabled = false\n')
    await loop.tick()
    assert rig.state()["chores"] == {}  # disabled is forgotten: enabling starts afresh


async def test_duplicates_are_reported_and_a_changed_schedule_reanchors(rig: Rig) -> None:
    rig.write("tasks/a.md", "From md.")
    rig.write("tasks/a.txt", "From txt.")
    rig.write("chores/one.toml", 'key = "k"\ntext = "One."\nevery = "1h"\n')
    rig.write("chores/two.toml", 'key = "k"\ntext = "Two."\nevery = "1m"\n')
    loop = rig.loop()
    assert [m.text for m in await loop.tick()] == ["From md."]
    root = rig.room.path
    assert [text for _, text in rig.notices] == [
        f"{root / 'tasks/a.txt'}: duplicate task name 'a' (a.md is used)",
        f"{root / 'chores/two.toml'}: duplicate key 'k' (also in one.toml)",
    ]
    rig.now = T0 + 1800
    rig.write("chores/one.toml", 'key = "k"\ntext = "One."\nevery = "30m"\n')
    assert await loop.tick() == []  # counted from the change, not from first sight
    rig.now = T0 + 3600
    [msg] = await loop.tick()
    assert (msg.text, msg.meta["occurrence"]) == ("One.", "2024-01-01T01:00:00+00:00")


async def test_malformed_pulse_json_is_reported_and_set_aside(rig: Rig) -> None:
    rig.write("pulse.json", "{not json")
    rig.write("tasks/t.md", "Do it.")
    [msg] = await rig.loop().tick()
    assert msg.thread_id == "task:t"
    [(level, text)] = rig.notices
    assert level == "warning" and "pulse.json" in text and "malformed" in text
    [kept] = rig.room.path.glob("pulse.json.bad-*")
    assert kept.read_text() == "{not json" and "t" in rig.state()["tasks"]
    rig.write("pulse.json", '{"tasks": {"t": "oops"}}')  # valid JSON, wrong shape
    assert len(await rig.loop().tick()) == 1 and len(rig.notices) == 2


async def test_failed_submit_is_reported_once_and_retried(rig: Rig) -> None:
    rig.write("tasks/t.md", "Do it.")
    rig.fail = RuntimeError("store is busy")
    loop = rig.loop()
    assert await loop.tick() == [] and await loop.tick() == []
    [(level, text)] = rig.notices
    assert level == "error" and "task:t" in text and "store is busy" in text
    assert rig.state()["tasks"] == {}  # nothing marked fired (its key is kept for the retry)
    rig.fail = None
    assert len(await loop.tick()) == 1 and await loop.tick() == []


@pytest.mark.parametrize("final", ["class-name", "attribute"])
async def test_final_rejection_is_reported_once_and_not_retried(rig: Rig, final: str) -> None:
    class Rejected(RuntimeError):
        pass

    class Refused(RuntimeError):
        final = True

    rig.write("tasks/t.md", "Do it.")
    rig.fail = Rejected("group full") if final == "class-name" else Refused("no")
    loop = rig.loop()
    assert await loop.tick() == [] and await loop.tick() == []
    assert len(rig.notices) == 1 and rig.notices[0][0] == "error"
    assert "t" in rig.state()["tasks"]
    rig.fail = None
    assert await rig.loop().tick() == []


async def test_run_reports_a_failing_tick_and_keeps_going(rig: Rig) -> None:
    class Stop(Exception):
        pass

    rig.write("tasks/t.md", "Do it.")
    clock_calls, sleeps = [0], []

    def clock() -> float:
        clock_calls[0] += 1
        if clock_calls[0] == 1:
            raise OSError("clock broke")
        return T0

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise Stop

    loop = PulseLoop(rig.room, rig.submit, rig.notice, clock=clock, sleep=sleep, interval=2.5)
    with pytest.raises(Stop):
        await loop.run()
    assert sleeps == [2.5, 2.5, 2.5] and [m.thread_id for m in rig.submitted] == ["task:t"]
    assert rig.notices == [("error", "pulse loop: tick failed: OSError: clock broke")]


@pytest.mark.parametrize(("text", "seconds"), [("15m", 900), ("1h30m", 5400), ("2d", 172800), (90, 90), ("0.5s", 0.5)])  # fmt: skip
def test_parse_every(text: object, seconds: float) -> None:
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["soon", "15", "-1m", 0, "15x", True])
def test_parse_every_rejects(text: object) -> None:
    with pytest.raises(ScheduleError):
        parse_every(text)


def test_front_matter() -> None:
    assert split_front_matter("no fence\n") == ({}, "no fence\n")
    settings, body = split_front_matter("---\n# note\nstrategy: 'react'\n\n---\nBody\n")
    assert (settings, body) == ({"strategy": "react"}, "Body\n")
    with pytest.raises(FileError, match="line 2"):
        split_front_matter("---\njust words\n---\nBody")


def test_agentdeck_run_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """systemd, docker and `timeout` stop with SIGTERM: the run ends as with Ctrl-C (exit 0,
    the run marked ended, agent.run saying stopped), not killed midway and found crashed."""
    import signal
    import subprocess
    import sys

    room = tmp_path / "room"
    code = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--room", str(room)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("agentdeck run ")
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # as `timeout` does: the second must not cut the stop
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "SIGTERM, stopping" in out
    assert room_rows(room, "SELECT status FROM runs") == [("ended",)]
    assert json.loads((room / "agent.run").read_text())["state"] == "stopped"
