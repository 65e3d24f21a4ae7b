"""The store's statements, each written for its database and named by the operation it serves.

`engine/store/sql/sqlite/*.sql` and `engine/store/sql/postgres/*.sql` hold the same names:
in a file `turns.sql`, a block that starts with `-- name: opened` is the statement
`turns.opened`, up to the next such line. The store's operations (engine/store/*.py) give
a statement by its name and its parameters; each store runs its own text for that name
(`Dialect.text`). A test asserts that both databases have every statement.

A few statements are composed by the operations (a history filter's conditions, a list of
ids): those are built from `Dialect`'s spellings (its placeholder, a join whose order the
planner keeps), never by rewriting one database's SQL into the other's.

Where a statement inserts several rows at once, `name*N` is its text with its VALUES row
given N times (an INSERT's VALUES list is spelled alike in both).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

__all__ = ["DIALECTS", "Dialect", "UnknownStatement", "dialect", "load"]

DialectName = Literal["sqlite", "postgres"]
_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*(?:\*\d+)?$")
MAX_ROWS = 10_000  # rows of one multi-row INSERT (`name*N`)


class UnknownStatement(KeyError):
    """A statement name that its database's catalogue does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


def load(name: DialectName) -> dict[str, str]:
    """Every statement of one database, by name (`file.name`)."""
    out: dict[str, str] = {}
    folder = resources.files("engine.store.sql").joinpath(name)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        stem = entry.name.removesuffix(".sql")
        text = entry.read_text(encoding="utf-8")
        heads = list(_HEADER.finditer(text))
        for i, head in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            body = _body(text[head.end() : end])
            key = f"{stem}.{head.group(1)}"
            if key in out:
                raise ValueError(f"{name}/{entry.name}: {head.group(1)} is named twice")
            if not body:
                raise ValueError(f"{name}/{entry.name}: {head.group(1)} has no statement")
            out[key] = body
    return out


def _body(text: str) -> str:
    """A block's statement on one line: comment lines and the final `;` left out."""
    lines = [ln.strip() for ln in text.splitlines()]
    return " ".join(ln for ln in lines if ln and not ln.startswith("--")).rstrip(";").strip()


@dataclass(frozen=True)
class Dialect:
    """One database's statements and the spellings composed statements use."""

    name: DialectName
    param: str  # a placeholder
    ordered_join: str  # a join whose order the planner keeps: SQLite's CROSS JOIN
    statements: dict[str, str] = field(repr=False)

    def params(self, n: int) -> str:
        """`n` placeholders, comma-separated (an IN list)."""
        return ",".join([self.param] * n)

    def text(self, sql: str) -> str:
        """The text of statement `sql`: a name (`turns.opened`, `turns.event*40`) from the
        catalogue, or SQL already in this database's dialect, as is."""
        found = self.statements.get(sql)
        if found is not None:
            return found
        if _NAME.match(sql) is None:
            return sql
        return _expanded(self, sql)

    def __hash__(self) -> int:
        return hash(self.name)


@functools.lru_cache(maxsize=512)
def _expanded(d: Dialect, sql: str) -> str:
    name, star, count = sql.partition("*")
    base = d.statements.get(name)
    if base is None:
        raise UnknownStatement(f"no statement {name!r} for {d.name}")
    if not star:
        return base
    n = int(count)
    head, values, row = base.rpartition(" VALUES ")
    if not values or not 1 <= n <= MAX_ROWS:
        raise UnknownStatement(f"{name!r} for {d.name} cannot insert {count} rows")
    return f"{head} VALUES {','.join([row] * n)}"


@functools.cache
def dialect(name: DialectName) -> Dialect:
    """The dialect of one database, its catalogue loaded once."""
    if name == "sqlite":
        return Dialect("sqlite", "?", "CROSS JOIN", load("sqlite"))
    return Dialect("postgres", "%s", "JOIN", load("postgres"))


DIALECTS: tuple[DialectName, ...] = ("sqlite", "postgres")
