"""Chore schedules the pulse loop must survive: rules that never (or endlessly) occur, rules
that fail when computed, and files the parser chokes on. Each is reported once, the loop is
never blocked by one, and every other task, chore and will still fires."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine.loops import pulse_schedule
from engine.loops.pulse_schedule import Schedule, ScheduleError, make_schedule
from tests.test_pulse import T0, Rig

pytestmark = pytest.mark.anyio


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def hits(rig: Rig, rel: str) -> list[str]:
    """The notices that name the room file `rel`."""
    return [text for _, text in rig.notices if str(rig.room.path / rel) in text]


BAD_RULES = {
    "interval0": ("FREQ=SECONDLY;INTERVAL=0", "INTERVAL"),
    "feb30": ("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30", "no occurrence"),
    "day40": ("FREQ=DAILY;BYMONTHDAY=40", "BYMONTHDAY"),
    "hour25": ("FREQ=SECONDLY;BYHOUR=25", "BYHOUR"),
    "ended": ("FREQ=DAILY;UNTIL=20200101T000000Z", "no occurrence"),
    "two": ("FREQ=DAILY\nFREQ=WEEKLY", "one RRULE"),
}


@pytest.mark.parametrize("name", sorted(BAD_RULES))
async def test_a_rule_with_no_occurrence_is_reported_when_read(rig: Rig, name: str) -> None:
    rule, reason = BAD_RULES[name]
    rig.write(f"chores/{name}.toml", f'text = "x"\nrrule = """{rule}"""\n')
    rig.write("chores/good.toml", 'text = "Fine."\nrrule = "FREQ=MINUTELY"\n')
    rig.write("tasks/t.md", "Do it.")
    rig.write("will.md", "Be kind.")
    loop = rig.loop()
    assert {m.thread_id for m in await loop.tick()} == {"task:t", "will:agent"}
    [hit] = hits(rig, f"chores/{name}.toml")
    assert "rrule" in hit and reason in hit
    rig.now += 60
    assert [m.thread_id for m in await loop.tick()] == ["chore:good"]
    assert len(hits(rig, f"chores/{name}.toml")) == 1  # once, not every tick
    assert name not in rig.state()["chores"]


def test_a_schedule_computation_ends_within_its_bound() -> None:
    """A rule that slipped past validation still cannot hold a thread for long: the search
    counts its work and gives up with an error instead of walking to year 9999."""
    since = T0
    for rule in ("FREQ=SECONDLY;INTERVAL=0", "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30"):
        schedule = Schedule("rrule", rule)  # as if validation had let it through
        with pytest.raises(ScheduleError, match="search"):
            schedule.next_after(since, since)
        with pytest.raises(ScheduleError, match="search"):
            schedule.due(since, since, since + 86400)


def test_validation_names_the_broken_part() -> None:
    with pytest.raises(ScheduleError, match=r"INTERVAL.*at least 1"):
        make_schedule("rrule", "FREQ=DAILY;INTERVAL=0", now=T0)
    with pytest.raises(ScheduleError, match=r"BYHOUR.*0 to 23"):
        make_schedule("rrule", "FREQ=DAILY;BYHOUR=9,24", now=T0)
    with pytest.raises(ScheduleError, match="every: the interval"):
        make_schedule("every", 1e400, now=T0)
    with pytest.raises(ScheduleError, match="cron: cannot read"):
        make_schedule("cron", "0 0 31 2 *", now=T0)
    assert make_schedule("rrule", "RRULE:FREQ=WEEKLY;BYDAY=MO", now=T0).kind == "rrule"


async def test_schedules_are_computed_off_the_event_loop(rig: Rig, monkeypatch) -> None:
    threads: list[bool] = []
    main = threading.get_ident()
    for name in ("next_after", "due"):
        real = getattr(Schedule, name)

        def spy(self, *args, _real=real):  # noqa: ANN001
            threads.append(threading.get_ident() == main)
            return _real(self, *args)

        monkeypatch.setattr(Schedule, name, spy)
    rig.write("chores/cron.toml", 'text = "x"\ncron = "*/5 * * * *"\n')
    rig.write("chores/rule.toml", 'text = "y"\nrrule = "FREQ=HOURLY"\n')
    loop = rig.loop()
    await loop.tick()
    rig.now += 3600
    assert len(await loop.tick()) == 2
    assert threads and not any(threads), "a schedule was computed on the event loop"


async def test_a_long_running_rule_stays_cheap_to_compute(rig: Rig) -> None:
    """Occurrences are counted from a point near the question, not from first sight: a
    minutely rule seen 400 days ago still finds its next minute within the bound."""
    rig.write("chores/m.toml", 'text = "x"\nrrule = "FREQ=MINUTELY"\n')
    loop = rig.loop()
    await loop.tick()
    rig.now = T0 + 400 * 86400 + 30
    [msg] = await loop.tick()
    assert msg.meta["occurrence"] == "2025-02-04T00:00:00+00:00"
    assert msg.meta["missed"] == pulse_schedule.COUNT_CAP - 1
    rig.now += 60
    [msg] = await loop.tick()
    assert (msg.meta["occurrence"], msg.meta["missed"]) == ("2025-02-04T00:01:00+00:00", 0)
    assert rig.notices == []


async def test_a_deeply_nested_chore_is_reported_once_and_the_rest_fire(rig: Rig) -> None:
    deep = "[" * 3000 + "]" * 3000
    rig.write("chores/a_deep.toml", f'text = "x"\nevery = "1m"\ny = {deep}\n')
    rig.write("chores/a_long.toml", f'text = "x"\nevery = "1m"\ny = {"9" * 5000}\n')
    rig.write("chores/b_good.toml", 'text = "Fine."\nevery = "1m"\n')
    rig.write("tasks/t.md", "Do it.")
    loop = rig.loop()
    assert [m.thread_id for m in await loop.tick()] == ["task:t"]
    [hit] = hits(rig, "chores/a_deep.toml")
    assert "nested too deeply" in hit
    [hit] = hits(rig, "chores/a_long.toml")
    assert "bad TOML: a number has more than" in hit
    rig.now += 60
    assert [m.thread_id for m in await loop.tick()] == ["chore:b_good"]
    assert len(hits(rig, "chores/a_deep.toml")) == len(hits(rig, "chores/a_long.toml")) == 1


async def test_a_chore_failing_when_computed_is_reported_once_and_skipped(
    rig: Rig, monkeypatch
) -> None:
    """Whatever a schedule raises when computed (here injected), that chore is reported once
    and skipped until its file changes; chores after it and the will still fire."""
    real_due = Schedule.due

    def due(self, last, since, now):  # noqa: ANN001
        if "BYMINUTE=7" in self.expr:
            raise ScheduleError("rrule: injected failure")
        return real_due(self, last, since, now)

    monkeypatch.setattr(Schedule, "due", due)
    rig.write("chores/a.toml", 'text = "x"\nrrule = "FREQ=HOURLY;BYMINUTE=7"\n')
    rig.write("chores/b.toml", 'text = "y"\nrrule = "FREQ=HOURLY;BYMINUTE=8"\n')
    rig.write("will.md", "Be kind.")
    loop = rig.loop(will_interval=3600)
    assert [m.thread_id for m in await loop.tick()] == ["will:agent"]
    for hour in (1, 2, 3):
        rig.now = T0 + hour * 3600 + 8 * 60
        fired = [m.thread_id for m in await loop.tick()]
        assert "chore:b" in fired and "chore:a" not in fired
    [hit] = [text for _, text in rig.notices if "injected failure" in text]
    assert "chores/a.toml" in hit
    rig.write("chores/a.toml", 'text = "x"\nrrule = "FREQ=HOURLY;BYMINUTE=9"\n')  # fixed
    await loop.tick()
    rig.now += 3600
    assert "chore:a" in [m.thread_id for m in await loop.tick()]


async def test_a_schedule_that_ends_while_running_is_said_once(rig: Rig) -> None:
    rig.write("chores/c.toml", 'text = "x"\nrrule = "FREQ=DAILY;COUNT=2"\n')
    loop = rig.loop()
    await loop.tick()  # first sight: Jan 1 00:00, itself the first occurrence (not after)
    rig.now = T0 + 86400
    [msg] = await loop.tick()
    assert msg.meta["occurrence"] == "2024-01-02T00:00:00+00:00"
    for _ in range(3):
        rig.now += 86400
        assert await loop.tick() == []
    [hit] = hits(rig, "chores/c.toml")
    assert "no occurrence after 2024-01-02T00:00:00+00:00" in hit


def test_every_is_bounded() -> None:
    with pytest.raises(ScheduleError):
        make_schedule("every", "0.0000001s", now=T0)
    with pytest.raises(ScheduleError):
        make_schedule("every", "100000d", now=T0)
