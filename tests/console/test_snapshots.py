"""Snapshots of the console's states at a fixed size, clock and ids (`--snapshot-update`)."""

from __future__ import annotations

import pytest

from tests.console.conftest import build
from tests.console.scenes import SCENES


@pytest.mark.parametrize("scene", list(SCENES))
def test_snapshot(scene: str, snap_compare, room) -> None:
    run_before, size, kw = SCENES[scene]
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)
