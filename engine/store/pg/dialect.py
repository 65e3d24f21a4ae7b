"""The store's statements, written in SQLite's dialect, as PostgreSQL runs them.

Every statement in engine/store/ is written once, for SQLite; `to_pg` rewrites the few
constructs PostgreSQL spells differently, so the two backends share their SQL:
- `?` placeholders become psycopg's `%s` (and a literal `%` becomes `%%`), outside string
  literals and quoted names;
- `INSERT OR IGNORE` becomes `... ON CONFLICT DO NOTHING`; `INSERT OR REPLACE` an upsert
  on the table's primary key (`PRIMARY_KEYS`) that sets every other column named;
- `iif(a, b, c)` becomes `CASE WHEN a THEN b ELSE c END`; scalar `max(a, b)`/`min(a, b)`
  become GREATEST/LEAST; `group_concat` becomes `string_agg`;
- `json_extract(x, '$.a.b')` becomes `(x::json #>> '{a,b}')`; `json_set(x, ?, json(?))`
  becomes a `jsonb_set` (the path parameter keeps its `$.a` spelling); in both an escaped
  NUL in the JSON, which PostgreSQL refuses, is read as U+FFFD;
- `a IS b` / `a IS NOT b` (SQLite's null-safe comparison) become IS [NOT] DISTINCT FROM
  unless `b` is NULL, TRUE or FALSE; `WHERE 1` becomes `WHERE true`; `CROSS JOIN t ON`
  (SQLite's hint to keep the join order) becomes `JOIN t ON`;
- `BEGIN IMMEDIATE` becomes `BEGIN`.
What it cannot rewrite (PRAGMAs, FTS5's MATCH and snippet) raises `Untranslatable`.
"""

from __future__ import annotations

import functools
import re

__all__ = ["PRIMARY_KEYS", "Untranslatable", "to_pg"]

# the conflict target of INSERT OR REPLACE, per table
PRIMARY_KEYS = {"rule_calls": ("call_id",), "counters": ("name",), "request_keys": ("key",),
                "open_calls": ("rowid",), "thread_groups": ("name",)}  # fmt: skip


class Untranslatable(ValueError):
    """A statement that has no PostgreSQL form here."""


_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^'\"]+")
_REFUSED = re.compile(r"\bPRAGMA\b|\bMATCH\b|\bsnippet\s*\(|\b\w+_fts\b|\bfts5\b", re.I)
_CALLS = re.compile(r"\b(iif|max|min|group_concat|json_extract|json_set)\s*\(", re.I)
_IS = re.compile(r"\bIS(\s+NOT)?\s+(?!NULL\b|TRUE\b|FALSE\b|DISTINCT\b|NOT\b)", re.I)
_WHERE_1 = re.compile(r"\bWHERE\s+1\b(?!\s*[=<>!])", re.I)
_CROSS_ON = re.compile(r"\bCROSS\s+JOIN\s+(\w+(?:\s+(?!ON\b)\w+)?)\s+ON\b", re.I)
_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.I)


@functools.cache
def to_pg(sql: str) -> str:
    """`sql` (SQLite's dialect, `?` placeholders) as PostgreSQL runs it through psycopg."""
    if _REFUSED.search(_code_only(sql)):
        raise Untranslatable(f"no PostgreSQL form for: {sql[:80]}")
    out = _rewrite_calls(sql)
    parts = []
    for tok in _TOKENS.findall(out):
        if tok[0] in "'\"":
            parts.append(tok.replace("%", "%%"))
            continue
        tok = tok.replace("%", "%%").replace("?", "%s")
        tok = _IS.sub(lambda m: "IS NOT DISTINCT FROM " if not m.group(1)
                      else "IS DISTINCT FROM ", tok)  # fmt: skip
        tok = _WHERE_1.sub("WHERE true", tok)
        tok = _CROSS_ON.sub(r"JOIN \1 ON", tok)
        tok = re.sub(r"\bBEGIN\s+IMMEDIATE\b", "BEGIN", tok, flags=re.I)
        parts.append(tok)
    return _insert_or("".join(parts))


def _code_only(sql: str) -> str:
    return "".join(t for t in _TOKENS.findall(sql) if t[0] not in "'\"")


def _insert_or(sql: str) -> str:
    m = _OR.match(sql)
    if m is None:
        return sql
    verb, table, cols = m.group(1).upper(), m.group(2), m.group(3)
    head = f"INSERT INTO {table}({cols})"
    rest = sql[m.end() :].rstrip().rstrip(";")
    if verb == "IGNORE":
        return f"{head}{rest} ON CONFLICT DO NOTHING"
    keys = PRIMARY_KEYS.get(table.lower())
    if keys is None:
        raise Untranslatable(f"INSERT OR REPLACE into {table}: its primary key is not known")
    names = [c.strip() for c in cols.split(",")]
    sets = ", ".join(f"{c} = excluded.{c}" for c in names if c not in keys)
    action = f"DO UPDATE SET {sets}" if sets else "DO NOTHING"
    return f"{head}{rest} ON CONFLICT ({', '.join(keys)}) {action}"


def _split_args(sql: str, start: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose `(` is at `start`, and the index after
    its `)`."""
    depth, args, begin, i = 0, [], start + 1, start
    while i < len(sql):
        ch = sql[i]
        if ch in "'\"":
            end = sql.index(ch, i + 1)
            while end + 1 < len(sql) and sql[end + 1] == ch:  # a doubled quote
                end = sql.index(ch, end + 2)
            i = end
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[begin:i])
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(sql[begin:i])
            begin = i + 1
        i += 1
    raise Untranslatable(f"unbalanced parentheses in: {sql[:80]}")


def _rewrite_calls(sql: str) -> str:
    """The SQLite functions above, innermost arguments first, outside string literals."""
    pos = 0
    while True:
        m = _next_call(sql, pos)
        if m is None:
            return sql
        name = m.group(1).lower()
        args, end = _split_args(sql, m.end() - 1)
        args = [_rewrite_calls(a).strip() for a in args]
        new = _call(name, args)
        if new is None:  # an aggregate max/min: leave it
            pos = m.end()
            continue
        sql = sql[: m.start()] + new + sql[end:]
        pos = m.start() + len(new)


def _next_call(sql: str, pos: int) -> re.Match[str] | None:
    """The next call of a rewritten function at or after `pos`, outside string literals."""
    for tok in _TOKENS.finditer(sql, pos):
        if tok.group()[0] in "'\"":
            continue
        m = _CALLS.search(sql, tok.start(), tok.end())
        if m is not None:
            return m
    return None


def _call(name: str, args: list[str]) -> str | None:
    if name == "iif":
        if len(args) != 3:
            raise Untranslatable("iif takes three arguments")
        return f"(CASE WHEN {args[0]} THEN {args[1]} ELSE {args[2]} END)"
    if name in ("max", "min"):
        if len(args) < 2:
            return None
        return f"{'GREATEST' if name == 'max' else 'LEAST'}({', '.join(args)})"
    if name == "group_concat":
        sep = args[1] if len(args) > 1 else "','"
        return f"string_agg(({args[0]})::text, {sep})"
    if name == "json_extract":
        path = re.fullmatch(r"'\$((?:\.\w+)+)'", args[1]) if len(args) == 2 else None
        if path is None:
            raise Untranslatable(f"json_extract with path {args[1:]}")
        keys = ",".join(path.group(1)[1:].split("."))
        return f"({_json(args[0])}::json #>> '{{{keys}}}')"
    # json_set(x, path, json(v)): the path a parameter or literal spelled '$.a.b'
    value = re.fullmatch(r"json\s*\((.*)\)", args[2], re.S) if len(args) == 3 else None
    if value is None:
        raise Untranslatable(f"json_set with arguments {args}")
    return (f"(jsonb_set({_json(args[0])}::jsonb, string_to_array(substr({args[1]}, 3), '.'),"
            f" {_json(value.group(1))}::jsonb))::text")  # fmt: skip


def _json(text: str) -> str:
    """The JSON text `text` as PostgreSQL can read it: an escaped NUL (`\\u0000`), which
    json and jsonb refuse (no text holds it), read as U+FFFD. json.dumps writes a NUL in
    a tool's output or a message that way, and one such row failed every query reading
    JSON across it (the event stream's, in bus.py)."""
    return rf"(replace(({text}), '\u0000', '\ufffd'))"
