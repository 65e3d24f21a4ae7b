"""What a room's turns record, found once when its history opens.

A room is read as it is: one a runtime of an earlier release made lacks what was added
since (the hash of a turn's instructions and their table, issue 32; the model that
answered it, issue 32; what it spent, issue 33; whether retention pruned it, issue
35; the forks table and where a step cut its thread's entries, issue 37) until a runtime opens it again, and its
history then reads without them instead of failing on a missing column. Each check is a
look at the schema, never at the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["POSTGRES", "SQLITE", "Records", "records"]


def _pg_column(name: str) -> str:
    return ("EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema ="
            f" current_schema() AND table_name = 'turns' AND column_name = '{name}')")  # fmt: skip


def _sqlite_column(name: str) -> str:
    return f"(SELECT count(*) FROM pragma_table_info('turns') WHERE name = '{name}') > 0"


# One row: (told, modelled, priced, pruned, forked); the cost column stands for the others
# issue 33 added with it (turns' cached_tokens and unpriced, the steps' tokens and cost),
# pruned_at for pruned_steps (issue 35), the forks table for steps' conv_upto (issue 37).
SQLITE = (
    "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name ="
    f" 'instructions') > 0 AND {_sqlite_column('instructions')},"
    f" {_sqlite_column('model')}, {_sqlite_column('cost')}, {_sqlite_column('pruned_at')},"
    " (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'forks') > 0"
)
POSTGRES = (
    f"SELECT to_regclass('instructions') IS NOT NULL AND {_pg_column('instructions')},"
    f" {_pg_column('model')}, {_pg_column('cost')}, {_pg_column('pruned_at')},"
    " to_regclass('forks') IS NOT NULL"
)


@dataclass(frozen=True)
class Records:
    """What the room's turns record."""

    told: bool = False  # the hash of their instructions, and the texts under it
    modelled: bool = False  # the model that answered them
    priced: bool = False  # what they and their steps spent
    pruned: bool = False  # whether retention pruned them, and when (issue 35)
    forked: bool = False  # the forks table, and where each step cut its thread (issue 37)


def records(rows: list[Any]) -> Records:
    """The answer of `SQLITE` or `POSTGRES`."""
    return Records(*(bool(rows[0][i]) for i in range(5)))
