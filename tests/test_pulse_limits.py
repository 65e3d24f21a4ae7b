"""Size limits of the files the pulse loop reads: a file over its limit is reported once,
keeps what pulse.json knows of it, and is never read whole into memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from pydantic import ValidationError

from engine.config import Config, PulseConfig
from engine.loops.pulse_files import Limits
from tests.test_pulse import Rig

pytestmark = pytest.mark.anyio

BIG = 4 * 1024 * 1024  # bytes of the oversized files; the limits below are a few KiB


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_limits_come_from_the_pulse_section() -> None:
    pc = Config.model_validate(
        {"pulse": {"max_task_bytes": 2048, "max_chore_bytes": 1024, "max_will_bytes": 4096}}
    ).pulse
    assert Limits.of(pc) == Limits(task=2048, chore=1024, will=4096)
    assert Limits.of(PulseConfig()) == Limits()
    with pytest.raises(ValidationError):
        PulseConfig(max_task_bytes=0)


async def test_files_over_their_limit_are_reported_once_and_not_read(rig: Rig) -> None:
    limits = Limits(task=4096, chore=1024, will=4096)
    task = rig.write("tasks/big.md", "Fine for now.")
    rig.write("tasks/small.md", "Small.")
    loop = rig.loop(limits=limits)
    assert {m.thread_id for m in await loop.tick()} == {"task:big", "task:small"}
    task.write_bytes(b"x" * BIG)  # grows past its limit after it fired once
    rig.write("chores/big.toml", 'text = "x"\nevery = "1m"\n# ' + "y" * BIG + "\n")
    rig.write("will.md", "w" * BIG)
    rig.write("tasks/later.md", "Later.")
    tracemalloc.start()
    try:
        for _ in range(3):
            fired = await loop.tick()
            rig.now += 60
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BIG // 4, f"{peak} bytes at peak: a file over its limit was read whole"
    assert [m.thread_id for m in fired] == [] and "later" in rig.state()["tasks"]
    for rel, limit, setting in (
        ("tasks/big.md", 4096, "max_task_bytes"),
        ("chores/big.toml", 1024, "max_chore_bytes"),
        ("will.md", 4096, "max_will_bytes"),
    ):
        [(level, text)] = [(lv, t) for lv, t in rig.notices if str(rig.room.path / rel) in t]
        assert level == "warning"
        assert f"larger than {limit} bytes" in text and f"[pulse] {setting}" in text
    assert "big" in rig.state()["tasks"]  # kept: shrinking it again is not a new task
    assert rig.state()["will"] is None
    task.write_text("Fine for now.")
    assert await loop.tick() == []
