"""Threads made from other threads (forks and replays, issue 37) as history reads them.

A thread made by a fork or a replay has a row in `forks` saying where it came from (its
`origin`); the history lists say so, and a list of threads is drawn as a tree: each
thread of a page followed by the threads made from it, depth first (a fork of a fork
beneath its fork), a thread listed beneath its source not listed again at its own place.
The reads are by key (forks' primary key, forks_from, threads' primary key), a few per
page: one for the page's origins, one a level of the tree.

Shapes: an origin is `thread_id kind from_thread from_turn from_step upto edited group
made_by made_at said` (`said`: "fork of t1 at step 12 (turn t7)", "replay of turn t7"); a
tree row is a thread row with `origin` (None: a thread of its own), `depth` (0: listed at
its own place), `branch` (the drawing before it: "├─ ", "│  └─ "; at most `DEPTH` levels
drawn) and `forks_more` (the threads made from it that are not listed beneath it, past
`SHOWN`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from engine.domain.forks import branches, cut, origin_text
from engine.store.history.filters import UnknownTurn
from engine.store.history.rows import thread_item

if TYPE_CHECKING:
    import sqlite3

    from engine.store.sql import Dialect


class History(Protocol):
    """What lineage reads through (engine/store/history's History; a protocol, so this
    module and the package import nothing of each other's)."""

    d: Dialect
    forked: bool

    @property
    def where(self) -> str: ...
    async def _all(self, sql: str, params: Any = ()) -> list[sqlite3.Row]: ...
    async def _one(self, sql: str, params: Any = ()) -> sqlite3.Row | None: ...


SHOWN = 20  # threads made from one thread listed beneath it (the rest are counted)
DEPTH = 6  # levels of the tree read beneath a page, and drawn (a fork of a fork of ...)
LEVEL_ROWS = 500  # forks read for one level of a page's tree
LOOK_BACK = 64  # entries before a step's cut read (their roles) to find its calls
LOOK_AHEAD = 512  # entries after it (the results of its calls)


def origin_item(r: Any) -> dict[str, Any]:
    """A `forks` row as history hands it out."""
    try:
        edited = json.loads(r["edited"] or "{}")
    except ValueError:
        edited = {}
    step = r["from_step"]
    return {
        "thread_id": r["thread_id"], "kind": r["kind"], "from_thread": r["from_thread"],
        "from_turn": r["from_turn"], "from_step": None if step is None else int(step),
        "upto": int(r["upto"]), "edited": edited, "group": r["group_name"],
        "made_by": r["made_by"], "made_at": r["made_at"],
        "said": origin_text(r["kind"], r["from_thread"], r["from_turn"], step),
    }  # fmt: skip


async def origins(h: History, thread_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Where each of these threads came from, by thread (none for a thread of its own)."""
    ids = list(dict.fromkeys(thread_ids))
    if not h.forked or not ids:
        return {}
    rows = await h._all(f"SELECT * FROM forks WHERE thread_id IN ({h.d.params(len(ids))})", ids)
    return {r["thread_id"]: origin_item(r) for r in rows}


async def with_origins(h: History, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turn rows with their thread's `origin` (None: a thread of its own)."""
    found = await origins(h, (t["thread_id"] for t in items))
    for t in items:
        t["origin"] = found.get(t["thread_id"])
    return items


async def tree(h: History, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of thread rows as a tree (the module's docstring)."""
    by_id = {t["thread_id"]: t for t in items}
    found = await origins(h, by_id)
    children: dict[str, list[str]] = {}
    made: dict[str, int] = {}  # threads made from each one, listed or not
    level, seen = list(by_id), set(by_id)
    for _ in range(DEPTH):
        if not h.forked or not level:
            break
        rows = await h._all(
            f"SELECT * FROM forks WHERE from_thread IN ({h.d.params(len(level))}) "
            f"ORDER BY made_at, thread_id LIMIT {h.d.param}",
            [*level, LEVEL_ROWS],
        )
        level = []
        for r in rows:
            source, thread = r["from_thread"], r["thread_id"]
            made[source] = made.get(source, 0) + 1
            listed = children.setdefault(source, [])
            if len(listed) < SHOWN and thread not in listed:
                listed.append(thread)
                found[thread] = origin_item(r)
                if thread not in seen:
                    seen.add(thread)
                    level.append(thread)
    missing = [t for kids in children.values() for t in kids if t not in by_id]
    if missing:
        rows = await h._all(
            f"SELECT * FROM threads WHERE id IN ({h.d.params(len(missing))})", missing
        )
        by_id.update({r["id"]: thread_item(r) for r in rows})
    beneath = {t for kids in children.values() for t in kids}
    out: list[dict[str, Any]] = []
    drawn: set[str] = set()

    def walk(thread: str, depth: int) -> None:
        if thread in drawn or thread not in by_id:
            return
        drawn.add(thread)
        kids = children.get(thread, [])
        more = made.get(thread, 0) - len(kids)
        out.append({**by_id[thread], "origin": found.get(thread), "depth": depth,
                    "forks_more": max(0, more)})  # fmt: skip
        for kid in kids:
            walk(kid, depth + 1)

    for t in items:
        if t["thread_id"] not in beneath:
            walk(t["thread_id"], 0)
    # A long chain (a fork of a fork of ...) is drawn at most DEPTH deep: the deeper ones
    # as the deepest, each still saying what it was made from.
    for row, branch in zip(out, branches([min(r["depth"], DEPTH) for r in out]), strict=True):
        row["branch"] = branch
    return out


async def fork_preview(h: History, turn_id: str, step_id: int, show: int) -> dict[str, Any]:
    """What a fork of `turn_id` at its step `step_id` would copy: `thread_id`, `upto` (the
    entries 0 .. upto - 1) and the last `show` of them, `entries`: `seq role text editable`
    (`editable`: a user message or a tool result, which the fork may change)."""
    if not h.forked:
        raise UnknownTurn(f"{h.where} predates forks: open the room once with the runtime")
    row = await h._one("history.fork_step", (step_id, turn_id))
    if row is None:
        raise UnknownTurn(f"no step {step_id} in turn {turn_id}")
    thread, upto = row["thread_id"], row["conv_upto"]
    if upto is None:  # a step made before forks: the entries written by its end
        upto = (await h._one("history.entries_until", (thread, row["ended_at"])) or [0])[0]
    upto = int(upto)
    low = max(0, upto - LOOK_BACK)
    roles = await h._all("history.entry_roles", (thread, low, upto + LOOK_AHEAD))
    upto = low + cut([r["role"] for r in roles], upto - low)
    rows = await h._all("history.entries", (thread, max(0, upto - show), upto))
    return {"turn_id": turn_id, "step_id": step_id, "thread_id": thread, "upto": upto,
            "entries": [_entry(r) for r in rows]}  # fmt: skip


def _entry(r: Any) -> dict[str, Any]:
    try:
        body = json.loads(r["body"])
        compaction = bool(body.get("compaction"))
        calls = [f"{c.get('name')} {json.dumps(c.get('arguments'), ensure_ascii=False)}"
                 for c in body.get("tool_calls") or [] if isinstance(c, dict)]  # fmt: skip
    except (ValueError, AttributeError):
        compaction, calls = False, []
    return {"seq": int(r["seq"]), "role": r["role"], "text": r["text"], "calls": calls,
            "editable": r["role"] in ("user", "tool") and not compaction}  # fmt: skip
