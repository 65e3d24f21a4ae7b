"""A notice is one line, whatever a file's name holds (found by the fuzz suite: a task file
named with a line break wrote two lines to the log, so a name could forge one)."""

from __future__ import annotations

import logging

import pytest

from engine.domain.events import Notice
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


async def test_a_notice_with_line_breaks_is_one_line(tmp_path, caplog) -> None:
    seen: list[Notice] = []
    async with Runtime.open(tmp_path / "room", kind="test", provider=OfflineModel(delay=0)) as rt:
        rt.subscribe(lambda e: seen.append(e) if isinstance(e, Notice) else None)
        with caplog.at_level(logging.WARNING, logger="agentdeck"):
            rt.notice("warning", "tasks/evil\n12:00:00 ERROR: forged\r\u2028.md: bad \udcff name")
    (notice,) = seen
    for text in (notice.text, caplog.records[-1].getMessage()):
        assert "\n" not in text and "\r" not in text and "\u2028" not in text
        assert "evil\\x0a12:00:00" in text and "\\udcff" in text
