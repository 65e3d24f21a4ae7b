"""What the history screen draws, from `engine.api.history`'s plain dicts; no Textual here.

Lists are drawn as lines of cells, `(text, component class)` pairs that the line views
style from the theme (glyph + word for every state, never colour alone). A turn's steps
and calls become the live view's own `StepRow` and `CallRow`, so the history is drawn by
the same timeline and calls widgets as the live view. Filter keys cycle through values
the room's counters name (`History.counts()`), never through a scan of the database.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from console.format import duration, one_line, short_id
from console.glyphs import Look, look
from console.history import spent
from console.state import CallRow
from console.steps import StepRow
from engine.api.history import Filters, HistoryError, parse_time
from engine.domain.usage import Usage
from engine.lifecycle import CallStatus, DecisionStatus

Cells = tuple[tuple[str, str], ...]  # one drawn line: (text, component class or "")

# `s` cycles these; the four the operator asks about most come first.
STATUS_CYCLE = ("failed", "denied", "cancelled", "waiting", "running", "done")
DIM, BOLD, MATCH = "history--dim", "history--bold", "history--match"
ROLE_CLASSES = {"user": "chat--operator", "assistant": "chat--agent", "tool": "chat--tool"}
ROLE_LABELS = {"user": "you", "assistant": "agent", "tool": "tool", "system": "system"}
RUN_LOOKS = {  # a run's status: active | ended | crashed
    "ended": Look("■", "ended", "state--muted"),
    "crashed": Look("✖", "crashed", "state--failed"),
}


def stamp(at: float | None) -> str:
    """Month, day and local wall time: history spans days, the live view does not."""
    return time.strftime("%m-%d %H:%M:%S", time.localtime(at)) if at else "—"


def fit(text: Any, width: int) -> str:
    """`text` on one line, cut with an ellipsis and padded to `width` cells."""
    text = " ".join(str(text or "").split())
    return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)


def plural(n: int, word: str, width: int = 5) -> str:
    return f"{n:>{width}} {word}{'' if n == 1 else 's'}"


def state_cells(state: Look, width: int = 11) -> tuple[str, str]:
    return f"{state.glyph} {state.word}".ljust(width), state.style


# -- the filters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Criteria:
    """What the screen lists: turns that pass `filters`, or search hits when `search`."""

    filters: Filters = field(default_factory=Filters)
    search: str = ""

    @property
    def empty(self) -> bool:
        return self.filters.empty and not self.search

    def set(self, **changes: Any) -> Criteria:
        """These criteria with some filters changed (raises HistoryError when they clash)."""
        return replace(self, filters=replace(self.filters, **changes))


def next_value(options: Sequence[str], current: str | None) -> str | None:
    """The value after `current` in `options`, then None (no filter), then the first."""
    if not options:
        return None
    if current is None:
        return options[0]
    index = list(options).index(current) if current in options else len(options) - 1
    return options[index + 1] if index + 1 < len(options) else None


def parse_range(text: str, now: float) -> tuple[float | None, float | None]:
    """`SINCE [UNTIL]`, each an ISO date or time or an age (2h, 3d); empty: no range."""
    parts = text.replace("..", " ").split()
    if len(parts) > 2:
        raise HistoryError(f"bad time range {text!r}: give SINCE or SINCE UNTIL")
    since = parse_time(parts[0], now) if parts else None
    until = parse_time(parts[1], now) if len(parts) > 1 else None
    Filters(since=since, until=until)  # an empty range says so
    return since, until


def describe(query: Criteria) -> Iterator[tuple[str, str]]:
    """The filter line: every filter by name, those in use in bold."""
    f = query.filters
    for name in ("status", "origin", "group", "thread", "tool", "run"):
        value = getattr(f, name)
        yield f"  {name} ", DIM
        yield (value, BOLD) if value is not None else ("all", "")
    yield "  time ", DIM
    if f.since is None and f.until is None:
        yield "all", ""
    else:
        yield f"{stamp(f.since) if f.since else '…'} → {stamp(f.until) if f.until else 'now'}", BOLD
    yield "  search ", DIM
    yield (f"“{query.search}”", BOLD) if query.search else ("—", "")


def active_filters(query: Criteria) -> list[str]:
    """The filters in use, by name (for a notice or a pane title)."""
    used = [f.name for f in fields(query.filters) if getattr(query.filters, f.name) is not None]
    return used + (["search"] if query.search else [])


def turns_title(query: Criteria, shown: int, more: bool, total: int | None,
                thread_spent: Usage | None = None) -> str:  # fmt: skip
    """The turns pane's title: how many turns (or search hits), the filters in use, and
    with a thread's, what that thread spent (`thread_spent`)."""
    plus = "+" if more else ""
    if query.search:
        title = f"Search “{query.search}” ({shown}{plus} hit{'s' if shown != 1 else ''})"
    else:
        title = f"Turns ({total if total is not None else f'{shown}{plus}'})"
    if used := [f for f in active_filters(query) if f != "search"]:
        title += " · " + ", ".join(used)
    if query.filters.thread is not None and (said := spent.thread_text(thread_spent)):
        title += f" · {said}"
    return title


# -- list lines ------------------------------------------------------------------------------


def turn_cells(t: dict[str, Any]) -> Cells:
    calls = t["calls"]
    return (
        (stamp(t["created_at"]) + " ", DIM),
        (fit(short_id(t["turn_id"]), 10) + " ", BOLD),
        (fit(t["thread_id"], 10) + " ", ""),
        state_cells(look(t["status"], t["reason"])),
        (f"{calls:>2} call{' ' if calls == 1 else 's'} ", DIM),
        (f"{spent.list_text(t):>{spent.LIST_WIDTH}} ", DIM),
        (one_line(t["text"], 200), ""),
        *(((f"  · {pruned_text(t)}", DIM),) if t.get("pruned_at") is not None else ()),
        *(((f"  · {one_line(t['origin']['said'], 120)}", DIM),) if t.get("origin") else ()),
    )


def pruned_text(t: dict[str, Any]) -> str:
    """What retention left of a turn (engine/services/retention.py): its steps went."""
    return f"steps pruned {time.strftime('%Y-%m-%d', time.localtime(t['pruned_at']))}"


def run_cells(r: dict[str, Any]) -> Cells:
    state = RUN_LOOKS.get(r["status"]) or look(r["status"])
    return (
        (stamp(r["started_at"]) + " ", DIM),
        (fit(short_id(r["run_id"]), 10) + " ", BOLD),
        (fit(r["kind"], 8) + " ", ""),
        state_cells(state, 10),
        (plural(r["turns"], "turn"), DIM),
    )


def thread_cells(h: dict[str, Any]) -> Cells:
    """A thread in the threads list, in its tree (`History.tree`): the drawing before a
    thread made from another (`├─ `) and, after it, where it came from."""
    branch = h.get("branch", "")
    said = [h["origin"]["said"]] if h.get("origin") else []
    said += [f"(+{h['forks_more']} more made from it)"] if h.get("forks_more") else []
    return (
        (stamp(h["updated_at"]) + " ", DIM),
        (branch, DIM),
        (fit(h["thread_id"], max(10, 22 - len(branch))) + " ", BOLD),
        (fit(h["group"], 7) + " ", ""),
        (plural(h["turns"] or 0, "turn"), DIM),
        ("  " + one_line(" ".join(said), 200) if said else "", DIM),
    )


def hit_key(hit: dict[str, Any]) -> str:
    return f"{hit['kind']}:{hit['message_id'] if hit['kind'] == 'message' else hit['call_id']}"


def hit_cells(hit: dict[str, Any]) -> Cells:
    """A search hit with the matching text: the words FTS5 bracketed, in bold."""
    if hit["kind"] == "call":
        where = (fit(f"⚙ {hit['tool']}", 9) + " ", "chat--tool")
    else:
        where = (fit(ROLE_LABELS.get(hit["role"], hit["role"]), 9) + " ",
                 ROLE_CLASSES.get(hit["role"], ""))  # fmt: skip
    return (
        (stamp(hit["created_at"]) + " ", DIM),
        (fit(short_id(hit["turn_id"]), 10) + " ", BOLD),
        (fit(hit["thread_id"], 10) + " ", ""),
        where,
        *snippet_cells(hit["snippet"] or ""),
    )


def snippet_cells(snippet: str) -> Cells:
    """`a [b] c` as plain, matched (brackets kept: bold is not the only sign) and plain."""
    out: list[tuple[str, str]] = []
    rest = " ".join(snippet.split())
    while (start := rest.find("[")) >= 0 and (end := rest.find("]", start)) > start:
        if start:
            out.append((rest[:start], ""))
        out.append((rest[start : end + 1], MATCH))
        rest = rest[end + 1 :]
    if rest:
        out.append((rest, ""))
    return tuple(out)


# -- one turn --------------------------------------------------------------------------------


def step_rows(detail: dict[str, Any], first_seq: int) -> list[StepRow]:
    """The turn's steps as timeline rows; `seq` counts on from `first_seq` (never reused,
    so the timeline's line cache cannot mix up two turns)."""
    t = detail["turn"]
    return [
        StepRow(first_seq + i, s["step_id"], s["started_at"], t["thread_id"], t["turn_id"],
                s["kind"], s["status"],
                s["ended_at"] - s["started_at"] if s["ended_at"] is not None else None,
                spent.step_summary(s), t["group"])
        for i, s in enumerate(detail["steps"])
    ]  # fmt: skip


def call_rows(detail: dict[str, Any]) -> list[CallRow]:
    """The turn's calls as the calls table's rows (a waiting call shows why it waits)."""
    t = detail["turn"]
    return [
        CallRow(c["call_id"], t["turn_id"], t["thread_id"], c["tool"], c["args"],
                CallStatus(c["status"]), c["result"],
                c["suspend_reason"] if c["status"] == CallStatus.SUSPENDED else c["error"],
                c["created_at"], c["updated_at"], c["ended_at"])
        for c in detail["calls"]
    ]  # fmt: skip


def decision_lines(d: dict[str, Any]) -> list[Cells]:
    """Who decided, when, with which arguments, and what then executed."""
    if d["action"] == "cancel":
        verb = ("⊘ denied", "state--cancelled")
        how = f" — {d['reason']}" if d["reason"] else ""
    else:
        verb = ("✔ approved", "state--succeeded")
        how = (f" with a given result {one_line(d['result'], 60)}" if d["use_result"] else
               f" with edited args {one_line(d['args'], 60)}" if d["args"] is not None else
               " as asked")  # fmt: skip
    remember = f" · remembered for the {d['remember']}" if d["remember"] else ""
    lines: list[Cells] = [
        (("  ", ""), verb, (f" {d['tool'] or '?'} ", BOLD), (f"call {d['call_id']}{how}", "")),
        (("      by ", DIM), (d["decided_by"], BOLD), (f" at {stamp(d['created_at'])}", DIM),
         (f" · {d['decision_id']} {d['status']}"
          + (f" {stamp(d['applied_at'])}" if d["applied_at"] else "") + remember, DIM)),
    ]  # fmt: skip
    then = d["then"]
    if then is not None:
        state = look(then["status"])
        said = then["result"] if then["status"] == CallStatus.SUCCEEDED else then["error"]
        lines.append((("      then ", DIM), state_cells(state, len(state.word) + 3),
                      (f"args {one_line(then['args'], 60)}", ""),
                      (f" → {one_line(said, 80)}" if said else "", "")))  # fmt: skip
    elif d["status"] != DecisionStatus.APPLIED:
        lines.append((("      then nothing ran: the decision is ", DIM), (d["status"], BOLD)))
    return lines


def turn_title(t: dict[str, Any]) -> str:
    state = look(t["status"], t["reason"])
    return f"Turn {t['turn_id']} · {t['thread_id']} · {state.glyph} {state.word}"


def told_cells(told: dict[str, Any] | None) -> Cells | None:
    """What the turn was told: the hash and the sources of its instructions, and a mark when
    that differs from what the thread's turn before it was told (None: nothing to say, a
    room that predates them or a turn told nothing, as the one before it)."""
    if told is None or (told["hash"] is None and not told["changed"]):
        return None
    if told["hash"] is None:
        said: Cells = (("no instructions", BOLD),)
    else:
        sources = ", ".join(p["source"] for p in told["parts"]) or "their text is not kept"
        said = ((told["hash"], BOLD), (f" · {sources}", ""))
    changed: Cells = ()
    if told["changed"]:
        changed = ((f"  ◆ changed since turn {told['previous']['turn_id']}", "state--waiting"),)
    return (("told   ", DIM), *said, *changed)


def notes(detail: dict[str, Any]) -> list[Cells]:
    """The turn pane: facts, the model that answered, what it spent, what it was told,
    where it suspended, decisions, messages, answer."""
    t = detail["turn"]
    took = duration(t["ended_at"] - t["created_at"]) if t["ended_at"] else "not finished"
    lines: list[Cells] = [
        (("group ", DIM), (str(t["group"]), BOLD), ("  origin ", DIM), (t["origin"], BOLD),
         ("  from ", DIM), (str(t["sender"]), ""), ("  run ", DIM), (str(t["run_id"]), ""),
         ("  strategy ", DIM), (str(t["strategy"]), ""), (f"  {t['rounds'] or 0} rounds", DIM)),
        ((f"{stamp(t['created_at'])} → {stamp(t['ended_at'])} ({took})", DIM),
         (f" · {plural(len(detail['steps']), 'step', 0)} · " if t.get("pruned_at") is None else
          f" · {pruned_text(t)} ({plural(t['steps'], 'step', 0)}: results and events went) · ",
          DIM), (plural(len(detail["calls"]), "call", 0), DIM)),
        (("asked  ", DIM), (t["text"] or "", "")),
    ]  # fmt: skip
    if t.get("model"):  # (None: a room that predates it)
        lines.append((("model  ", DIM), (t["model"], BOLD)))
    if said := spent.said(t):
        lines.append((("spent  ", DIM), (said, BOLD), (f" · {spent.tokens_apart(t)}", DIM)))
    if (told := told_cells(t.get("told"))) is not None:
        lines.append(told)
    if (made := detail.get("origin")) is not None:  # its thread came from a fork or a replay
        lines.append((("thread ", DIM), (t["thread_id"], BOLD), (f": {made['said']}", "")))
    if t["detail"]:
        lines.append((("detail ", DIM), (t["detail"], "state--failed")))
    if (sus := detail["suspended"]) is not None:
        lines += [(), ((f"Where it suspended ({len(sus['calls'])})", BOLD),
                       ("  w selects it", DIM))]  # fmt: skip
        for c in sus["calls"]:
            state = look(CallStatus.SUSPENDED) if c["waiting"] else look(c["status"])
            settled = ("still waiting for a decision" if c["waiting"] else
                       f"settled by {c['decision_id']}" if c["decision_id"] else "settled")  # fmt: skip
            lines.append((("  ", ""), state_cells(state, 12), (f"step {c['step_idx']} · ", DIM),
                           (f"{c['tool']} ", BOLD), (f"call {c['call_id']} — ", ""),
                           (f"{c['reason'] or 'no reason given'} · {settled}", DIM)))  # fmt: skip
    lines += [(), ((f"Decisions ({len(detail['decisions'])})", BOLD),)]
    for d in detail["decisions"]:
        lines += decision_lines(d)
    if not detail["decisions"]:
        lines.append((("  none", DIM),))
    lines += [(), ((f"Messages ({len(detail['messages'])})", BOLD),)]
    for m in detail["messages"]:
        role = m["role"]
        asked = [f"{c.get('name')} {one_line(c.get('arguments'), 60)}"
                 for c in (m["body"] or {}).get("tool_calls", []) if isinstance(c, dict)]  # fmt: skip
        lines.append((
            (f"  {ROLE_LABELS.get(role, role):<6}", ROLE_CLASSES.get(role, "")),
            (f" {stamp(m['created_at'])[6:]}  ", DIM),
            (m["text"] or "", ""),
            (f"  → calls {'; '.join(asked)}" if asked else "", DIM),
        ))  # fmt: skip
    if t["answer"]:
        lines += [(), (("Answer  ", BOLD), (t["answer"], ""))]
    if forks := detail.get("forks"):
        lines += [(), ((f"Made from this turn ({len(forks)})", BOLD), ("  F on a step forks, "
                                                                      "P replays", DIM))]  # fmt: skip
        for f in forks:
            what = "replay" if f["kind"] == "replay" else f"fork at step {f['from_step']}"
            lines.append(((f"  {what} → ", DIM), (f["thread_id"], BOLD),
                          (f"  {f['group']} · by {f['made_by']} · {stamp(f['made_at'])}", DIM)))  # fmt: skip
    return lines


def suspension_notice(detail: dict[str, Any]) -> str:
    """The notification after a jump: where the turn suspended and how it was settled."""
    sus = detail["suspended"]
    first = sus["calls"][0]
    still = "still waiting for a decision" if first["waiting"] else (
        f"settled by {first['decision_id']}" if first["decision_id"] else "settled")  # fmt: skip
    more = f" (and {len(sus['calls']) - 1} more)" if len(sus["calls"]) > 1 else ""
    return (f"Turn {sus['turn_id']} suspended at step {sus['step_idx']}, call "
            f"{sus['call_id']} ({first['tool']}): {first['reason'] or 'no reason'}; "
            f"{still}{more}.")  # fmt: skip
