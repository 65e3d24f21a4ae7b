"""Two turns side by side: a replay and its original, or any two (issue 37).

A `TurnDiff` is computed from two turns' records as the history reader gives them
(`History.turn`: the turn row, its steps, messages, calls and decisions), so it reads the
same from a room nobody owns, from its owner and from a console:

- each side's facts (`Side`): thread, group, model, strategy, outcome, times, tokens, cost,
  steps; `facts_changed` names those that differ (times are shown, never compared);
- the rows: what each turn appended to its conversation, in order (the user's message, the
  assistant's texts), and after each assistant text the calls it asked for (tool,
  arguments, status, result or error, and the decisions on each). A tool message is shown
  on its call's row; one naming no call of the turn is a row of its own, and a call no
  assistant text asked for (a breakpoint's pause) is placed by when it was made.

The rows of A and B are aligned as a sequence (difflib's matcher over each row's kind and
tool), then marked: `same`, `changed` (the fields that differ named, and for changed
arguments the keys that differ, as canonical JSON), `only_a`, `only_b`. Ids and times
never make two rows differ.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from engine.domain.usage import Usage, spent_text

Mark = Literal["same", "changed", "only_a", "only_b"]
MARKS: dict[str, str] = {"same": "=", "changed": "~", "only_a": "<", "only_b": ">"}
# The facts compared (in the order a header lists them); times are shown, never compared.
COMPARED = ("group", "model", "strategy", "status", "reason", "input_tokens", "output_tokens",
            "cached_tokens", "cost", "unpriced", "steps", "rounds", "calls")  # fmt: skip
MAX_VALUE = 200  # characters of one argument's value a difference quotes


class Side(BaseModel):
    """One turn's facts."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    turn_id: str
    thread_id: str
    group: str | None = None
    origin: str | None = None
    model: str | None = None  # `provider:model`; None: a room that predates it
    strategy: str | None = None
    status: str
    reason: str | None = None
    text: str = ""  # the message it answered
    answer: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    duration: float | None = None  # seconds from start to end; None: not ended
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None  # US dollars of its priced tokens; None: a room without costs
    unpriced: int = 0  # its tokens whose model has no known price
    steps: int = 0
    rounds: int = 0  # inferences
    calls: int = 0
    pruned: bool = False  # retention pruned its steps (its calls keep no results)

    @property
    def spent(self) -> str:
        """What it spent, as the room says it (`nothing spent` when it used no tokens)."""
        used = Usage(self.input_tokens, self.output_tokens, self.cached_tokens,
                     self.cost or 0.0, self.unpriced, self.rounds)  # fmt: skip
        return spent_text(used) if used.tokens else "nothing spent"


class Decided(BaseModel):
    """A decision on a call, as a diff compares it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    action: str
    decided_by: str
    status: str
    args: Any = None  # edited arguments, if any
    use_result: bool = False
    reason: str = ""


class Entry(BaseModel):
    """One side of a row: a conversation entry, or a call."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    kind: str  # user | assistant | tool | system | call
    seq: int | None = None  # a message's place in its thread (None: a call)
    text: str = ""  # a message's text
    call_id: str | None = None
    tool: str | None = None
    args: Any = None
    status: str | None = None  # a call's; None: asked for, never recorded as a call
    result: str | None = None
    error: str | None = None
    decisions: list[Decided] = []
    at: float | None = None

    def summary(self) -> str:
        """This entry in one line: a message's text; a call's arguments (canonical JSON),
        status, result or error, and the decisions on it."""
        if self.kind != "call":
            return self.text
        said = self.result if self.status == "succeeded" else self.error
        out = f"{canonical(self.args)} -> {self.status or 'never run'}"
        out += f": {said}" if said else ""
        return out + "".join(f" [{d.action} by {d.decided_by}, {d.status}]"
                             for d in self.decisions)  # fmt: skip


class ArgChange(BaseModel):
    """One top-level argument that differs: its value on each side as canonical JSON
    (None: the side has no such key)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str  # "" when the arguments are not an object (compared whole)
    a: str | None = None
    b: str | None = None


class DiffRow(BaseModel):
    """One aligned row: an entry of A, of B, or both."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    mark: Mark
    kind: str
    a: Entry | None = None
    b: Entry | None = None
    changed: list[str] = []  # the fields that differ: text, tool, args, status, result, ...
    args: list[ArgChange] = []

    @property
    def symbol(self) -> str:
        return MARKS[self.mark]

    @property
    def label(self) -> str:
        """What the row is: a message's kind, or `call <tool>`."""
        entry = self.a or self.b
        return f"call {entry.tool}" if entry is not None and entry.kind == "call" else self.kind

    def what_changed(self) -> str:
        """A changed row's fields, changed arguments' keys with both values ("" if none)."""
        parts = []
        for name in self.changed:
            if name == "args" and self.args:
                keys = "; ".join(f"{c.key or 'all'}: {c.a or '(none)'} -> {c.b or '(none)'}"
                                 for c in self.args)  # fmt: skip
                parts.append(f"args ({keys})")
            else:
                parts.append(name)
        return "changed: " + ", ".join(parts) if parts else ""


class TurnDiff(BaseModel):
    """Two turns compared: their facts, the facts that differ, and the aligned rows."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    a: Side
    b: Side
    facts_changed: list[str] = []
    rows: list[DiffRow] = []

    def counts(self) -> dict[str, int]:
        """Rows per mark, every mark named."""
        out = dict.fromkeys(MARKS, 0)
        for row in self.rows:
            out[row.mark] += 1
        return out


def canonical(value: Any) -> str:
    """`value` as canonical JSON: keys sorted, no spaces, text as it is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)  # fmt: skip


# -- one side ------------------------------------------------------------------------------


def side(detail: dict[str, Any]) -> Side:
    """A turn's facts from its detail (`History.turn`)."""
    t = detail["turn"]
    started, ended = t.get("created_at"), t.get("ended_at")
    return Side(
        turn_id=t["turn_id"], thread_id=t["thread_id"], group=t.get("group"),
        origin=t.get("origin"), model=t.get("model"), strategy=t.get("strategy"),
        status=t["status"], reason=t.get("reason"), text=t.get("text") or "",
        answer=t.get("answer") or "", started_at=started, ended_at=ended,
        duration=ended - started if ended is not None and started is not None else None,
        input_tokens=t.get("input_tokens") or 0, output_tokens=t.get("output_tokens") or 0,
        cached_tokens=t.get("cached_tokens") or 0, cost=t.get("cost"),
        unpriced=t.get("unpriced") or 0, steps=t.get("steps") or 0,
        rounds=t.get("rounds") or 0, calls=t.get("calls") or 0,
        pruned=t.get("pruned_at") is not None,
    )  # fmt: skip


def _body(message: dict[str, Any]) -> dict[str, Any]:
    body = message.get("body")
    return body if isinstance(body, dict) else {}


def _call_entry(call: dict[str, Any], decisions: list[dict[str, Any]]) -> Entry:
    return Entry(
        kind="call", call_id=call["call_id"], tool=call["tool"], args=call["args"],
        status=call["status"], result=call["result"], error=call["error"],
        decisions=[Decided(action=d["action"], decided_by=d["decided_by"] or "",
                           status=d["status"], args=d["args"], use_result=d["use_result"],
                           reason=d["reason"] or "") for d in decisions],
        at=call["created_at"],
    )  # fmt: skip


def entries(detail: dict[str, Any]) -> list[Entry]:
    """What the turn appended, in order, with each assistant text's calls after it (see
    the module)."""
    calls = sorted(detail["calls"], key=lambda c: (c["step_id"] or 0, c["idx"] or 0))
    decided: dict[str, list[dict[str, Any]]] = {}
    for d in sorted(detail["decisions"], key=lambda d: (d["created_at"] or 0, d["decision_id"])):
        decided.setdefault(d["call_id"], []).append(d)
    asked: dict[str, list[dict[str, Any]]] = {}  # a model's call id -> its calls, in order
    for c in calls:
        if c["model_call_id"]:
            asked.setdefault(c["model_call_id"], []).append(c)
    answered = set(asked)  # a tool message naming one of these is shown on its call's row
    placed: set[str] = set()
    out: list[Entry] = []

    def place(call: dict[str, Any]) -> None:
        placed.add(call["call_id"])
        out.append(_call_entry(call, decided.get(call["call_id"], [])))

    unasked = sorted((c for c in calls if not c["model_call_id"]),
                     key=lambda c: c["created_at"] or 0)  # fmt: skip
    for m in sorted(detail["messages"], key=lambda m: m["seq"]):
        while unasked and (unasked[0]["created_at"] or 0) < (m["created_at"] or 0):
            place(unasked.pop(0))
        body = _body(m)
        if m["role"] == "tool" and body.get("tool_call_id") in answered:
            continue  # shown on its call's row
        out.append(Entry(kind=m["role"], seq=m["seq"], text=m["text"] or "",
                         at=m["created_at"]))  # fmt: skip
        if m["role"] != "assistant":
            continue
        for wanted in body.get("tool_calls") or ():
            if waiting := asked.get(wanted.get("id"), []):
                place(waiting.pop(0))
            else:  # asked for, never recorded as a call of this turn
                out.append(Entry(kind="call", tool=wanted.get("name"),
                                 args=wanted.get("arguments"), at=m["created_at"]))  # fmt: skip
    for c in [*unasked, *calls]:
        if c["call_id"] not in placed:
            place(c)
    return out


# -- comparing -----------------------------------------------------------------------------


def _key(entry: Entry) -> tuple[str, str | None]:
    """What two rows share to be aligned at all: their kind and tool."""
    return entry.kind, entry.tool


def _anchor(entry: Entry) -> tuple[str, str | None, str]:
    """What two rows share to be aligned first: their kind, tool, and text or arguments."""
    return entry.kind, entry.tool, entry.text if entry.kind != "call" else canonical(entry.args)


def _decisions(entry: Entry) -> list[tuple[str, ...]]:
    return [(d.action, d.decided_by, d.status, canonical(d.args), str(d.use_result), d.reason)
            for d in entry.decisions]  # fmt: skip


def changed_fields(a: Entry, b: Entry) -> list[str]:
    """The fields of two entries of one kind that differ (ids and times never do)."""
    if a.kind != "call":
        return [] if a.text == b.text else ["text"]
    differ = {
        "tool": a.tool != b.tool, "args": canonical(a.args) != canonical(b.args),
        "status": a.status != b.status, "result": a.result != b.result,
        "error": a.error != b.error, "decisions": _decisions(a) != _decisions(b),
    }  # fmt: skip
    return [name for name, yes in differ.items() if yes]


def _quoted(value: Any) -> str:
    text = canonical(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def arg_changes(a: Any, b: Any) -> list[ArgChange]:
    """The top-level keys whose values differ (both objects), else the whole of each."""
    if canonical(a) == canonical(b):
        return []
    if not isinstance(a, dict) or not isinstance(b, dict):
        return [ArgChange(key="", a=_quoted(a), b=_quoted(b))]
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in b or key not in a or canonical(a[key]) != canonical(b[key]):
            out.append(ArgChange(key=str(key), a=_quoted(a[key]) if key in a else None,
                                 b=_quoted(b[key]) if key in b else None))  # fmt: skip
    return out


def _pair(a: Entry, b: Entry) -> DiffRow:
    changed = changed_fields(a, b)
    args = arg_changes(a.args, b.args) if "args" in changed else []
    return DiffRow(mark="changed" if changed else "same", kind=a.kind, a=a, b=b,
                   changed=changed, args=args)  # fmt: skip


def align(left: list[Entry], right: list[Entry]) -> list[DiffRow]:
    """The rows of two turns aligned: rows alike in text or arguments first, then between
    those, rows of one kind and tool (see the module)."""
    rows: list[DiffRow] = []
    for op, i1, i2, j1, j2 in _opcodes(left, right, _anchor):
        if op == "equal":
            rows += [_pair(a, b) for a, b in zip(left[i1:i2], right[j1:j2], strict=True)]
        else:
            rows += _align_kinds(left[i1:i2], right[j1:j2])
    return rows


Opcodes = list[tuple[str, int, int, int, int]]


def _opcodes(left: list[Entry], right: list[Entry], key: Callable[[Entry], Hashable]) -> Opcodes:
    matcher = difflib.SequenceMatcher[Hashable](
        None, [key(e) for e in left], [key(e) for e in right], autojunk=False
    )
    return list(matcher.get_opcodes())


def _align_kinds(left: list[Entry], right: list[Entry]) -> list[DiffRow]:
    rows: list[DiffRow] = []
    for op, i1, i2, j1, j2 in _opcodes(left, right, _key):
        if op == "equal":
            rows += [_pair(a, b) for a, b in zip(left[i1:i2], right[j1:j2], strict=True)]
            continue
        a_part, b_part = left[i1:i2], right[j1:j2]
        for n in range(max(len(a_part), len(b_part))):
            a = a_part[n] if n < len(a_part) else None
            b = b_part[n] if n < len(b_part) else None
            if a is not None and b is not None and a.kind == b.kind:
                rows.append(_pair(a, b))  # one place, another tool: a changed call
                continue
            if a is not None:
                rows.append(DiffRow(mark="only_a", kind=a.kind, a=a))
            if b is not None:
                rows.append(DiffRow(mark="only_b", kind=b.kind, b=b))
    return rows


def _differ(a: Side, b: Side, names: Iterable[str]) -> list[str]:
    return [n for n in names if getattr(a, n) != getattr(b, n)]


def diff_turns(detail_a: dict[str, Any], detail_b: dict[str, Any]) -> TurnDiff:
    """Two turns' details (`History.turn`) compared."""
    a, b = side(detail_a), side(detail_b)
    return TurnDiff(a=a, b=b, facts_changed=_differ(a, b, COMPARED),
                    rows=align(entries(detail_a), entries(detail_b)))  # fmt: skip
