"""Every SQL statement in engine/store/ turns into PostgreSQL (engine/store/pg/dialect.py)
and PREPAREs against pg/schema.sql, but those listed in UNTRANSLATABLE with the reason.

Statements are collected from the source: every string literal, concatenation or f-string
(its names taken from the module) that starts a statement. An f-string part made at run
time (a WHERE built from filters, a table name) is replaced by a parameter, so the rest
of the statement is still checked; one whose shape needs the real part is listed too.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import json
import re
from pathlib import Path

import psycopg
import pytest

from engine.store.history.filters import Filters, hit_filter_sql
from engine.store.pg import history as pg_history
from engine.store.pg.batch import PG_INDEX_BATCH
from engine.store.pg.dialect import Untranslatable, to_pg
from engine.store.pg.migrations import migrate

STORE = Path(__file__).resolve().parent.parent / "engine" / "store"
STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|REPLACE|PRAGMA)\b", re.I)

# file:line of a statement -> why it has no PostgreSQL form (yet)
UNTRANSLATABLE = {
    "sqlite.py": "PRAGMAs of SQLite's own connection (PgStore has its own settings)",
    "bus.py": "the bus is a machine-local SQLite file, not the room's store",
    "migrations.py": "SQLite's own migrations (PostgreSQL's: pg/migrations.py)",
    "index_batch.py": "FTS5 indexing (PostgreSQL: generated tsvector columns, pg/batch.py)",
    "reader.py": "PRAGMA of SQLite's read-only connection (PgReader's session is READ ONLY)",
    "history/__init__.py:120": "SQLite's catalogue (a migrated PostgreSQL database has them all)",
    **dict.fromkeys(
        (
            "history/__init__.py:217",
            "history/__init__.py:295",
            "history/__init__.py:323",
            "history/__init__.py:362",
        ),
        "a table, order or column made at run time: tests/test_history.py runs them on PostgreSQL",
    ),  # fmt: skip
    **dict.fromkeys(
        ("history/filters.py:270", "history/filters.py:280"),
        "FTS5's MATCH and snippet (PostgreSQL: pg/history.py, below)",
    ),
    "history/rows.py:33": "a docstring that begins with 'Replace', not a statement",
}


def _module(path: Path) -> object:
    name = ".".join(path.relative_to(STORE.parent.parent).with_suffix("").parts)
    return importlib.import_module(name.removesuffix(".__init__"))


def _value(node: ast.expr, names: dict, unknown: str = "?") -> str | None:
    """The statement `node` spells, run-time parts of an f-string as `unknown`."""
    try:
        value = eval(compile(ast.Expression(node), "<sql>", "eval"), names)  # noqa: S307
        return value if isinstance(value, str) else None
    except Exception:  # noqa: BLE001 - a part known only at run time
        if not isinstance(node, ast.JoinedStr):
            return None
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            else:
                try:
                    parts.append(str(eval(compile(ast.Expression(part.value), "<sql>", "eval"),
                                          names)))  # noqa: S307  # fmt: skip
                except Exception:  # noqa: BLE001
                    parts.append(unknown)
        return "".join(parts)


FRAGMENT = re.compile(r"(WHERE|VALUES|IN \(|AND|,)\s*$", re.I)  # completed at run time


def statements() -> dict[str, list[str]]:
    """Every statement of engine/store/ (but pg/) -> where it is written. An f-string with
    parts made at run time comes in two readings (those parts as a parameter, and empty):
    one of them must prepare."""
    found: dict[str, list[str]] = {}
    for path in sorted(STORE.rglob("*.py")):
        if "pg" in path.relative_to(STORE).parts:
            continue
        names = vars(_module(path))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
                sql = _value(node, names)
                if sql and STATEMENT.match(sql) and not FRAGMENT.search(sql):
                    where = f"{path.relative_to(STORE)}:{node.lineno}"
                    found.setdefault(where, []).append(sql)
                    empty = _value(node, names, "")
                    if empty is not None and empty != sql:
                        found[where].append(empty)
    for i, (sql, _) in enumerate(PG_INDEX_BATCH):
        found[f"pg/batch.py[{i}]"] = [sql]
    hits = Filters(group="chat", tool="shell", status="failed", since=1.0, until=2.0)
    for kind, at, turn in (("message", "m.created_at", "m.turn_id"),
                           ("call", "c.created_at", "c.turn_id")):  # fmt: skip
        where, _ = hit_filter_sql(hits, at, turn, batched=True)
        for bounded, raw in itertools.product((False, True), repeat=2):
            found[f"pg/history.py[{kind}, {bounded}, {raw}]"] = [
                pg_history.search_sql(kind, where, bounded, raw)
            ]
    return found


def _listed(where: str) -> bool:
    return any(where.startswith(prefix) for prefix in UNTRANSLATABLE)


def _numbered(sql: str) -> str:
    """psycopg's `%s` as the server's `$n`, for PREPARE."""
    counter = iter(range(1, 10_000))
    return re.sub(r"%%|%s", lambda m: "%" if m.group() == "%%" else f"${next(counter)}", sql)


def test_every_statement_is_collected() -> None:
    found = statements()
    assert len(found) > 100
    every = [sql for variants in found.values() for sql in variants]
    assert any("json_extract" in s for s in every) and any("INSERT OR REPLACE" in s for s in every)


def test_every_statement_translates_and_prepares(pg_url: str) -> None:
    failed: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn)
        n = 0
        for where, variants in statements().items():
            if _listed(where):
                continue
            errors = []
            for sql in variants:
                n += 1
                try:
                    pg = _numbered(to_pg(sql))
                    conn.execute(f"PREPARE s{n} AS {pg}")  # type: ignore[arg-type]
                    conn.execute(f"DEALLOCATE s{n}")  # type: ignore[arg-type]
                    break
                except (Untranslatable, psycopg.Error) as exc:
                    errors.append(f"{str(exc).splitlines()[0]}\n    {sql}")
            else:
                failed.append(f"{where}: " + "\n  ".join(errors))
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize(
    ("sqlite", "pg"),
    [
        ("SELECT a FROM t WHERE b = ? AND c = 'x?'", "SELECT a FROM t WHERE b = %s AND c = 'x?'"),
        ("SELECT iif(a, b, c)", "SELECT (CASE WHEN a THEN b ELSE c END)"),
        ("SELECT max(a, min(b, 1)), max(c)", "SELECT GREATEST(a, LEAST(b, 1)), max(c)"),
        ("SELECT a IS NOT b, a IS NULL, a IS ?",
         "SELECT a IS DISTINCT FROM b, a IS NULL, a IS NOT DISTINCT FROM %s"),
        ("INSERT OR IGNORE INTO t(a) VALUES (?)", "INSERT INTO t(a) VALUES (%s) ON CONFLICT DO NOTHING"),
        ("SELECT json_extract(body, '$.a.b') LIKE '5%'",
         r"SELECT ((replace((body), '\u0000', '\ufffd'))::json #>> '{a,b}') LIKE '5%%'"),
        ("SELECT group_concat(x, ';')", "SELECT string_agg((x)::text, ';')"),
        ("SELECT 1 FROM a CROSS JOIN b ON b.x = a.x WHERE 1 AND a.y",
         "SELECT 1 FROM a JOIN b ON b.x = a.x WHERE true AND a.y"),
    ],
)  # fmt: skip
def test_sqlite_spellings(sqlite: str, pg: str) -> None:
    assert to_pg(sqlite) == pg


def test_what_has_no_postgresql_form_says_so() -> None:
    for sql in ("PRAGMA user_version", "SELECT rowid FROM calls_fts WHERE calls_fts MATCH ?"):
        with pytest.raises(Untranslatable):
            to_pg(sql)


def test_json_holding_an_escaped_nul_is_read_and_set(pg_url: str) -> None:
    """json.dumps writes a NUL as \\u0000, which PostgreSQL's json and jsonb refuse: read
    as U+FFFD, so one such event did not fail every read of the event stream."""
    body = json.dumps({"status": "suspended", "out": "a\x00b"})
    with psycopg.connect(pg_url, autocommit=True) as conn:
        status = conn.execute(to_pg("SELECT json_extract(?, '$.status')"), (body,)).fetchone()
        assert status == ("suspended",)
        [meta] = conn.execute(to_pg("SELECT json_set(?, ?, json(?))"),
                              (body, "$.k", json.dumps("c\x00d"))).fetchone() or ()  # fmt: skip
    assert json.loads(meta) == {"status": "suspended", "out": "a\ufffdb", "k": "c\ufffdd"}
