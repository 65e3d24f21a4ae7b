"""History's full-text search on PostgreSQL: its own tsvector/tsquery, not FTS5.

`messages.search` and `tool_calls.search` are generated tsvector columns with GIN indexes
(pg/schema.sql, the 'simple' configuration: words as written, lower-cased), current in the
writing transaction, so a hit needs no batch. Plain words become a `to_tsquery` of quoted
lexemes (all must match, `word*` a prefix): quotes and operators in them are plain text,
and no input can make it malformed. `raw` queries take PostgreSQL's web search syntax
(`websearch_to_tsquery`: "a phrase", or, -not), which never fails either. Hits are paged
by id (messages) and rowid (calls), newest first, as on SQLite; the snippet
(`ts_headline`, matches in [brackets]) is made only for the rows of the page.
"""

from __future__ import annotations

from engine.store.history.filters import search_words

__all__ = ["LAST_ID", "search_sql", "tsquery"]

# The column that grows with each row of an append-only table (SQLite: its rowid).
LAST_ID = {"steps": "id", "tool_calls": "rowid", "messages": "id"}

_HEADLINE = ("'StartSel=\"[\", StopSel=\"]\", MaxWords=12, MinWords=3, ShortWord=0,"
             " MaxFragments=1, FragmentDelimiter=\"…\"'")  # fmt: skip


def tsquery(text: str) -> str:
    """Plain words -> `to_tsquery` text: each word a quoted lexeme (all must match), a
    trailing `*` a prefix match. Words without a letter or digit are left out (none left:
    ""; `engine.store.history.filters.fts_query` says so first)."""
    terms = ["'" + word.replace("\\", "\\\\").replace("'", "''") + "'" + (":*" if prefix else "")
             for word, prefix in search_words(text)]  # fmt: skip
    return " & ".join(terms)


def search_sql(kind: str, where: str, bounded: bool, raw: bool) -> str:
    """Newest hits first of one kind (`message` or `call`) (parameters: the query, the
    bound if `bounded`, the filters' parameters, the limit), with the columns of SQLite's
    `search_sql`."""
    parse = "websearch_to_tsquery" if raw else "to_tsquery"
    if kind == "message":
        page = (
            "SELECT m.id, m.turn_id, m.thread_id, m.role, m.seq, m.created_at, m.text, q.q"
            f" FROM messages m, {parse}('simple', %s) AS q(q) WHERE m.search @@ q.q"
            + (" AND m.id < %s" if bounded else "")
            + where
            + " ORDER BY m.id DESC LIMIT %s"
        )
        return (
            "SELECT h.id AS rid, h.id AS message_id, NULL AS call_id, h.turn_id, h.thread_id,"
            " h.role, NULL AS tool, NULL AS status, h.seq, h.created_at,"
            f" ts_headline('simple', h.text, h.q, {_HEADLINE}) AS snippet"
            f" FROM ({page}) AS h ORDER BY h.id DESC"
        )
    page = (
        "SELECT c.rowid AS rid, c.id, c.turn_id, c.thread_id, c.tool, c.status, c.created_at,"
        " concat_ws(' ', c.args, c.result, c.error) AS text, q.q"
        f" FROM tool_calls c, {parse}('simple', %s) AS q(q) WHERE c.search @@ q.q"
        + (" AND c.rowid < %s" if bounded else "")
        + where
        + " ORDER BY c.rowid DESC LIMIT %s"
    )
    return (
        "SELECT h.rid, NULL AS message_id, h.id AS call_id, h.turn_id, h.thread_id,"
        " NULL AS role, h.tool, h.status, NULL AS seq, h.created_at,"
        f" ts_headline('simple', h.text, h.q, {_HEADLINE}) AS snippet"
        f" FROM ({page}) AS h ORDER BY h.rid DESC"
    )
