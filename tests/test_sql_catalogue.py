"""The store's statements (engine/store/sql/): both databases have every one, each in its
own dialect, every name the code gives is there, and every statement prepares against its
database's schema: SQLite's with EXPLAIN on a new room's execution.db, PostgreSQL's with
PREPARE on a migrated database. Composed statements (history's filters and search, the
batch on PostgreSQL, the cluster's claims) are prepared too, in each dialect.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import sqlite3
from pathlib import Path

import pytest

from engine.store.history.filters import Filters, hit_filter_sql, pending_turns_sql, turns_sql
from engine.store.history.pending import counters_sql, tool_counters_sql
from engine.store.sql import DIALECTS, Dialect, UnknownStatement, dialect, load

ENGINE = Path(__file__).resolve().parent.parent / "engine"
CATALOGUE = ENGINE / "store" / "sql"
NAME = re.compile(r"^([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)(\*.*)?$")
_STRINGS = re.compile(r"'(?:[^']|'')*'")


def _files(name: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in load(name):  # type: ignore[arg-type]
        stem, _, op = key.partition(".")
        out.setdefault(stem, set()).add(op)
    return out


def test_both_databases_have_every_statement() -> None:
    sqlite, postgres = _files("sqlite"), _files("postgres")
    assert sqlite == postgres
    assert sum(len(ops) for ops in sqlite.values()) > 80


def _code(sql: str) -> str:
    return _STRINGS.sub("''", sql)


def test_each_is_written_in_its_own_dialect() -> None:
    for name, sql in load("sqlite").items():
        assert "%s" not in _code(sql), name
    for name, sql in load("postgres").items():
        code = _code(sql)
        assert "?" not in code, name
        for spelling in ("INSERT OR", "iif(", "json_extract(", "json_set(", "json_each("):
            assert spelling not in code, (name, spelling)


def _names_in_code() -> dict[str, str]:
    """Every string in engine/ that names a statement (`file.op`, `file.op*N`) -> where."""
    stems = set(_files("sqlite"))
    found: dict[str, str] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                text = head.value if isinstance(head, ast.Constant) else None
            m = NAME.match(text or "")
            if m and m.group(1) in stems:
                found[f"{m.group(1)}.{m.group(2)}"] = f"{path.relative_to(ENGINE)}:{node.lineno}"
    return found


def test_every_name_the_code_gives_is_in_the_catalogue() -> None:
    names = _names_in_code()
    assert len(names) > 80
    known = set(load("sqlite"))
    missing = {name: where for name, where in names.items() if name not in known}
    assert not missing
    unused = known - set(names)
    assert not unused, f"statements no code names: {sorted(unused)}"


def test_a_name_is_resolved_and_a_typo_is_refused() -> None:
    d = dialect("sqlite")
    assert d.text("turns.call_row").startswith("SELECT * FROM tool_calls")
    assert d.text("SELECT 1") == "SELECT 1"  # SQL in the dialect, as is
    assert d.text("turns.events*2").count("(?,?,?,?,?,?)") == 2
    with pytest.raises(UnknownStatement, match="turns.call_roe"):
        d.text("turns.call_roe")
    with pytest.raises(UnknownStatement):
        d.text("turns.call_row*2")  # not an INSERT ... VALUES


def _composed(d: Dialect) -> list[tuple[str, str]]:
    """Statements the code composes, with every filter and both cursors."""
    out: list[tuple[str, str]] = []
    every = Filters(group="chat", tool="shell", status="failed", since=1.0, until=2.0)
    for filters, driver, after, batched in itertools.product(
        (Filters(), every), (None, "tool:shell", "group:chat"), (None, (1.0, "t")), (False, True)
    ):
        if driver is not None and driver not in filters.marks():
            continue
        out.append(("turns_sql", turns_sql(d, filters, driver, after, 10, batched)[0]))
        if driver == "tool:shell":
            out.append(("pending_turns_sql", pending_turns_sql(d, filters, driver, after)[0]))
    out.append(("counters_sql", counters_sql(d, ["turns", "tool:shell", "is:denied"])[0]))
    out.append(("tool_counters_sql", tool_counters_sql()[0]))
    for at, turn in (("m.created_at", "m.turn_id"), ("c.created_at", "c.turn_id")):
        where, _ = hit_filter_sql(d, every, at, turn, batched=True)
        out.append(("hit_filter_sql", f"SELECT 1 FROM messages m, tool_calls c WHERE true{where}"))
    return out


@pytest.mark.anyio
async def test_every_sqlite_statement_prepares(tmp_path: Path) -> None:
    from engine.store.index_batch import INDEX_BATCH
    from engine.store.sqlite import SqliteStore

    store = await SqliteStore.open(tmp_path / "execution.db")
    await store.close()
    d = dialect("sqlite")
    statements = [*load("sqlite").items(), *_composed(d),
                  *(("index_batch", d.text(sql)) for sql, _ in INDEX_BATCH)]  # fmt: skip
    conn = sqlite3.connect(tmp_path / "execution.db")
    failed = []
    for name, sql in statements:
        try:
            conn.execute(f"EXPLAIN {sql}", [None] * sql.count("?"))
        except sqlite3.Error as exc:
            failed.append(f"{name}: {exc}\n    {sql}")
    conn.close()
    assert not failed, "\n".join(failed)


def _numbered(sql: str) -> str:
    """psycopg's `%s` as the server's `$n`, for PREPARE."""
    counter = iter(range(1, 10_000))
    return re.sub(r"%%|%s", lambda m: "%" if m.group() == "%%" else f"${next(counter)}", sql)


@pytest.mark.postgres
def test_every_postgres_statement_prepares(pg_url: str) -> None:
    import psycopg

    from engine.store.pg import history as pg_history
    from engine.store.pg.batch import PG_INDEX_BATCH
    from engine.store.pg.migrations import migrate

    d = dialect("postgres")
    statements = [*load("postgres").items(), *_composed(d),
                  *(("pg/batch", d.text(sql)) for sql, _ in PG_INDEX_BATCH)]  # fmt: skip
    every = Filters(group="chat", tool="shell", status="failed", since=1.0, until=2.0)
    for kind, bounded, raw in itertools.product(("message", "call"), (False, True), (False, True)):
        where, _ = hit_filter_sql(d, every, "m.created_at", "m.turn_id", batched=True)
        if kind == "call":
            where, _ = hit_filter_sql(d, every, "c.created_at", "c.turn_id", batched=True)
        statements.append(("pg/history", pg_history.search_sql(kind, where, bounded, raw)))
    failed = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn)
        for n, (name, sql) in enumerate(statements):
            try:
                conn.execute(f"PREPARE s{n} AS {_numbered(sql)}")  # type: ignore[arg-type]
                conn.execute(f"DEALLOCATE s{n}")  # type: ignore[arg-type]
            except psycopg.Error as exc:
                failed.append(f"{name}: {str(exc).splitlines()[0]}\n    {sql}")
    assert not failed, "\n".join(failed)


@pytest.mark.postgres
def test_json_holding_an_escaped_nul_is_set_on_postgres(pg_url: str) -> None:
    """json.dumps writes a NUL as \\u0000, which PostgreSQL's json and jsonb refuse: read as
    U+FFFD, so one such call did not fail the write of its meta."""
    import psycopg

    from engine.store import turns

    body = json.dumps({"status": "suspended", "out": "a\x00b"})
    sql, params = turns.call_meta_set("c1", "k", "c\x00d")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # the statement as it runs on the room's table, here a temporary one of that name
        conn.execute("CREATE TEMP TABLE tool_calls(id text, meta text)")
        conn.execute("INSERT INTO tool_calls VALUES ('c1', %s)", (body,))
        conn.execute(dialect("postgres").text(sql), params)  # type: ignore[arg-type]
        [meta] = conn.execute("SELECT meta FROM tool_calls WHERE id = 'c1'").fetchone() or ()
    assert json.loads(meta) == {"status": "suspended", "out": "a\ufffdb", "k": "c\ufffdd"}


def test_the_dialects_are_the_two_stores() -> None:
    assert DIALECTS == ("sqlite", "postgres")
    assert dialect("postgres").param == "%s" and dialect("sqlite").param == "?"


def test_the_bus_shows_the_kinds_the_projector_reads() -> None:
    from engine.store.bus import PUBLIC_KINDS

    for name in DIALECTS:
        sql = dialect(name).text("projection.public_events")
        assert set(re.findall(r"'(\w+)'", sql)) - {"suspended"} == set(PUBLIC_KINDS)
