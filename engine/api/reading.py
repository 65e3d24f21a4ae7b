"""A room nobody owns, read without opening a run.

A run is an interval of agent execution, so a command that only reads (`agentdeck pending`,
`agentdeck rules`) must not make one: `RoomReader` answers those operations from the
room's store through a read-only connection (engine/store/reader.py) and from its
agentdeck.toml, as the room's runtime would read them, and writes nothing. Any other
operation is not its to answer (the CLI opens the room for those).

Two cases are not a read. A run that died while a call was running left that call's
outcome unknown, and putting it up for review is a write that the next runtime of the room
makes first; and a room made by an earlier release is migrated by the first runtime of
this one that opens it. For such a room `RoomReader.open` answers None and the command
opens the room, so `pending` lists the call as waiting for its review, as it would with an
owner.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from engine.api.client import RoomClient
from engine.room import Room, RoomError
from engine.store.reader import ReadsFrom, is_current, open_reader

if TYPE_CHECKING:
    from engine.api.tool_models import ToolsView
    from engine.api.usage_models import BudgetsView, By, UsageReport
    from engine.domain.audit import AuditPage
    from engine.domain.breakpoints import Breakpoint
    from engine.domain.decisions import PendingCall
    from engine.domain.review import Review
    from engine.domain.rules import Rule
    from engine.domain.turn_diff import TurnDiff
    from engine.store import Store


class RoomReader(RoomClient):
    """The read-only operations of a room nobody owns (see the module)."""

    def __init__(self, room: Room, reads: ReadsFrom | None) -> None:
        self.room = room
        self._reads = reads

    @classmethod
    async def open(cls, room: Room) -> RoomReader | None:
        """A reader of the room; None when a dead run left calls running (see the module).
        RoomError when the path is not a room's folder (or one that cannot be read);
        StoreError when its store cannot be read."""
        if room.path.exists():
            room.check()  # a file is no room
            if not os.access(room.path, os.R_OK | os.X_OK):
                raise RoomError(f"room {room.path} cannot be read")
        reader = await open_reader(room)
        if reader is not None:
            try:
                usable = await is_current(reader) and not await reader.scalar(
                    "reading.running_calls"
                )
            except BaseException:
                await reader.close()
                raise
            if not usable:  # an older release's room (opening migrates it), or calls left
                await reader.close()
                return None
        return cls(room, reader)

    @property
    def hosted(self) -> bool:
        return False

    async def pending(self) -> list[PendingCall]:
        from engine.config import ApprovalsConfig, load_section
        from engine.services.deadlines import pending_calls

        if self._reads is None:  # no database yet: nothing ever waited
            return []
        approvals = load_section(self.room.config, "approvals", ApprovalsConfig)
        return await pending_calls(self._reads, approvals)

    async def rules(self) -> list[Rule]:
        from engine.config import load_config, toml_rules
        from engine.domain.rules import RuleBook
        from engine.store import rules as ruled
        from engine.tools.builtin import builtin_tools

        config = load_config(self.room.config)
        toml = toml_rules(config, self.room.config, [t.name for t in builtin_tools()])
        book = RuleBook(workspace=self.room.workspace)
        if self._reads is None:
            book.load(toml, 0)
        else:
            book.load(await ruled.load(self._reads, toml), await ruled.last_id(self._reads))
        return book.listed()

    async def breakpoints(self) -> list[Breakpoint]:
        from engine.domain.breakpoints import BreakBook
        from engine.store import breakpoints as pointed

        book = BreakBook(await pointed.load(self._reads) if self._reads is not None else ())
        return book.listed()

    async def reviews(self) -> list[Review]:
        from engine.decisions.review import reviews
        from engine.tools import ToolRegistry
        from engine.tools.builtin import builtin_tools

        if self._reads is None:  # no database yet: nothing ever ran
            return []
        return await reviews(self._reads, self.room.workspace, ToolRegistry(builtin_tools()))

    async def tools(self) -> ToolsView:
        from engine.api.tool_models import view
        from engine.config import load_config
        from engine.shell.sandbox import Sandbox
        from engine.tools import ToolRegistry
        from engine.tools.builtin import builtin_tools

        config = load_config(self.room.config)
        box = Sandbox(config.sandbox.shell, config.sandbox.network, self.room.workspace)
        box.start(temporary=False)
        return view(ToolRegistry(builtin_tools()), None, await self.rules(), box.describe(),
                    configured=config.mcp)  # fmt: skip

    async def usage(
        self,
        by: By | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> UsageReport:
        import time

        from engine.api.usage_models import Spend, UsageReport, report
        from engine.domain.usage import day_of

        if self._reads is None:  # no database yet: nothing was spent
            today = day_of(time.time())
            return UsageReport(by=by, since=since or today, until=until or today, rows=[],
                               total=Spend())  # fmt: skip
        return await report(self._reads, by, since, until, time.time(), limit)

    async def budgets(self) -> BudgetsView:
        import time

        from engine.api.usage_models import view
        from engine.config import load_config
        from engine.services.budgets import Budgets

        book = Budgets(load_config(self.room.config), cast("Store", self._reads), time.time)
        if self._reads is not None:
            await book.load()
        return view(book)

    async def audit(
        self,
        since: float | None = None,
        thread: str | None = None,
        decided_by: str | None = None,
        kind: str | None = None,
        limit: int = 1000,
        after: str | None = None,
    ) -> AuditPage:
        from engine.api.audit import read_page

        return await read_page(self._reads, since=since, thread=thread, decided_by=decided_by,
                               kind=kind, limit=limit, after=after)  # fmt: skip

    async def diff(self, turn_a: str, turn_b: str) -> TurnDiff:
        from engine.api.diffs import read_diff

        return await read_diff(self.room, turn_a, turn_b)

    async def aclose(self) -> None:
        if self._reads is not None:
            await self._reads.close()
            self._reads = None
