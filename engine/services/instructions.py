"""Where a turn's instructions come from (engine/domain/instructions.py says the order):
the room's file, agentdeck.toml, and each thread's own as an operator set it.

The file is read again only when it changed (its modification time and size, looked at
once per pass of the event loop: a stat took 20-40 us a turn on a busy runtime, the thread
waiting for the interpreter after the system call); a thread's
own are read from execution.db once per run and kept (an operator's change goes through
`set_thread`, which writes and keeps it). A file that cannot be read is said once and left
out, never a failed turn.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from engine.config import Config
from engine.domain.instructions import MAX_PART, Instructions, assemble
from engine.store import Store
from engine.store import turns as rows

GUESSED = ("task", "chore", "will")  # a thread id's prefix that names its group
KEPT_THREADS = 4096  # threads whose own instructions are kept in memory


class InstructionsBook:
    """The instructions of each thread's turns, from the room, its config and its store."""

    def __init__(self, room: Path, config: Config, store: Store,
                 notice: Callable[[str, str], None] | None = None) -> None:  # fmt: skip
        self.path = room / config.agent.file
        self.config, self.store, self._notice = config, store, notice
        self._file: tuple[tuple[int, int], str | None] | None = None  # (mtime, size), text
        self._threads: OrderedDict[str, str | None] = OrderedDict()
        self._said: str | None = None  # the last problem with the file told
        self._looked: object = None  # the loop in whose pass the file was looked at
        self._seen: str | None = None  # and what it said then

    def file_text(self) -> str | None:
        """The room's instructions file, read again only when it changed (None: none);
        looked at once per pass of the event loop, whatever the turns that open in it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (no loop: looked at each time)
            return self._read()
        if self._looked is loop:
            return self._seen
        self._seen, self._looked = self._read(), loop
        loop.call_soon(self._look_again)
        return self._seen

    def _look_again(self) -> None:
        self._looked = None

    def _read(self) -> str | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._file = None
            return None
        except OSError as exc:
            self._problem(f"{self.path} cannot be read: {exc.strerror or exc}")
            return None
        key = (stat.st_mtime_ns, stat.st_size)
        if self._file is not None and self._file[0] == key:
            return self._file[1]
        try:
            with self.path.open("rb") as f:
                raw = f.read(MAX_PART * 4 + 1)
            text: str | None = raw.decode("utf-8", errors="replace")
        except OSError as exc:
            self._problem(f"{self.path} cannot be read: {exc.strerror or exc}")
            return None
        self._file, self._said = (key, text), None
        return text

    def knows(self, thread_id: str) -> bool:
        """Whether the thread's own are kept (`for_thread` then reads nothing)."""
        return thread_id in self._threads

    def adopt(self, thread_id: str, text: str | None) -> None:
        """The thread's own as the store has them (read with its conversation), kept."""
        self._keep(thread_id, text)

    async def thread_text(self, thread_id: str) -> str | None:
        """The thread's own: an operator's (execution.db), else agentdeck.toml's."""
        if thread_id in self._threads:
            self._threads.move_to_end(thread_id)
            text = self._threads[thread_id]
        else:
            row = await rows.thread_instructions(self.store, thread_id)
            text = row[0] if row is not None else None
            self._keep(thread_id, text)
        if text is None and (settings := self.config.threads.get(thread_id)) is not None:
            return settings.instructions
        return text

    async def for_thread(self, thread_id: str, group: str) -> Instructions:
        """What a new turn on `thread_id` (of `group`) is told."""
        settings = self.config.groups.get(group)
        return assemble(self.file_text(), self.config.agent.instructions,
                        (group, settings.instructions if settings else None),
                        (thread_id, await self.thread_text(thread_id)))  # fmt: skip

    async def describe(self, thread_id: str) -> tuple[str, Instructions, str | None]:
        """The thread's group (a thread that never ran: as its id's prefix says), what its
        next turn is told, and its own part."""
        row = await rows.thread_instructions(self.store, thread_id)
        prefix = thread_id.partition(":")[0]
        group = row[1] if row is not None else (prefix if prefix in GUESSED else "chat")
        own = await self.thread_text(thread_id)
        return group, await self.for_thread(thread_id, group), own

    async def set_thread(self, thread_id: str, group: str, text: str | None, at: float) -> None:
        """An operator sets the thread's own instructions (None or blank: none)."""
        text = text.strip() if text and text.strip() else None
        if text is not None and len(text) > MAX_PART:
            raise ValueError(f"instructions are at most {MAX_PART:,} characters")
        await self.store.write([rows.thread_instructions_set(thread_id, group, text, at)])
        self._keep(thread_id, text)

    async def of_turn(self, hash_: str | None) -> Instructions:
        """What a turn was told, from its recorded hash (empty: none, or not found)."""
        if not hash_:
            return Instructions()
        row = await rows.instructions_of(self.store, hash_)
        return Instructions.from_stored(row[1]) if row is not None else Instructions()

    def _keep(self, thread_id: str, text: str | None) -> None:
        self._threads[thread_id] = text
        self._threads.move_to_end(thread_id)
        while len(self._threads) > KEPT_THREADS:
            self._threads.popitem(last=False)

    def _problem(self, text: str) -> None:
        if text != self._said and self._notice is not None:
            self._notice("warning", f"{text}: its instructions are left out")
        self._said = text
