"""The offline model: a deterministic, rule-based stand-in for a real LLM.

agentdeck must run end to end with no model configured (first start, demos, tests):
turns, tool calls, operator decisions and results all need something that talks like a
model. `OfflineModel` streams the same events a real provider does, derived only from
the conversation, so the same request always yields the same events:

- after tool results, it answers by quoting them (returned / failed / still pending);
- otherwise it turns trigger phrases in the latest user message into tool calls
  (`cmd` in backticks, time/date, list files, read, write, calc / what is, fetch);
- anything else gets a short, honest reply saying what it is and what it can do.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import anyio

from engine.domain.messages import ConvMessage
from engine.domain.plans import ACTION_RESULTS
from engine.providers.base import (
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.shell.result import shell_result

FALLBACK = (
    "I'm agentdeck's offline model, a rule-based stand-in (no LLM is configured). "
    "I can run `commands` in backticks, tell the time or date, list files (in PATH), "
    'read PATH, write "TEXT" to PATH, calc EXPR (or "what is EXPR") and fetch URL.'
)
QUOTE_LIMIT = 400
_MASK = "\x00"  # replaces backtick spans so their text triggers no other rule
_TRAIL = ".,;:!?)]}'\""

_BACKTICK = re.compile(r"`([^`\n]+)`")
# end of a sentence, a line, before a `cmd`, or before ", and"/" and" joining another request
_END = r"(?=[.!?;,](?:\s|$)|\s+and\s|[\n\x00]|$)"
_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "write_file",
        re.compile(
            r"\bwrite\s+(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?P<raw>\S[^\n]*?))"
            r"\s+to\s+(?P<path>\S+)",
            re.I,
        ),
    ),
    ("read_file", re.compile(r"\bread\s+(?:the\s+)?(?:file\s+)?(?P<path>\S+)", re.I)),
    ("list_dir", re.compile(r"\blist\s+(?:the\s+)?files\b(?:\s+in\s+(?P<path>\S+))?", re.I)),
    ("http_get", re.compile(r"\bfetch\s+(?P<url>\S+)", re.I)),
    ("calc", re.compile(r"\bcalc(?:ulate)?\s+(?P<expr>[^\n\x00]+?)" + _END, re.I)),
    ("calc", re.compile(r"\bwhat(?:'s|\s+is)\s+(?P<expr>[^\n\x00]*?\d[^\n\x00]*?)" + _END, re.I)),
    ("clock", re.compile(r"\b(?:time|date)\b", re.I)),
]
_WHAT = {
    "shell": "run a command",
    "clock": "tell the time",
    "list_dir": "list files",
    "read_file": "read files",
    "write_file": "write files",
    "calc": "calculate",
    "http_get": "fetch URLs",
}


_CONTEXT = re.compile(r"\A<context>[^<]*</context>\n\n")  # engine/turn/view.py's
_ASKS_INSTRUCTIONS = re.compile(r"\b(instructions?|system prompt)\b", re.IGNORECASE)


def _asked(text: str) -> str:
    """A user message without the circumstances the runtime reads it with."""
    return _CONTEXT.sub("", text, count=1)


def summarised(transcript: str) -> str:
    """The offline model's summary of a compaction's transcript (engine/turn/compaction.py):
    how much it covered, the user's requests (the last few), the tools called."""
    asked = [
        a
        for a in re.findall(r"^\[user\]\n(?:<context>[^<]*</context>\n\n)?(.+)$", transcript, re.M)
        if not a.startswith("[The conversation")
    ]
    tools = re.findall(r"^\[calls (\w[\w.]*)\(", transcript, re.M)
    parts = [f"Summary of {transcript.count(chr(10) + chr(10) + '[') + 1} earlier entries."]
    if asked:
        shown = "; ".join(_short(a, 60) for a in asked[-5:])
        parts.append(f"The user asked {len(asked)} time{'s' if len(asked) != 1 else ''}, "
                     f"lately: {shown}.")  # fmt: skip
    if tools:
        counted = ", ".join(f"{n} ×{tools.count(n)}" for n in dict.fromkeys(tools))
        parts.append(f"Tools called: {counted}.")
    return " ".join(parts)


def told(system: str | None) -> str:
    """What the offline model says when asked about its instructions: what it received."""
    if not system:
        return "I was given no instructions."
    sources = re.findall(r"^## From (.+)$", system, re.MULTILINE)  # engine/domain/instructions
    if sources:
        named = ", ".join(sources[:-1]) + f" and {sources[-1]}" if len(sources) > 1 else sources[0]
        return f"I was given instructions of {len(system):,} characters, from {named}."
    return (f"I was given instructions of {len(system):,} characters, beginning: "
            f"{_short(system.strip().splitlines()[0], 200)}")  # fmt: skip


def _words(text: str) -> int:
    return len(text.split())


def _short(text: str, limit: int = QUOTE_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _shell_said(text: str) -> str | None:
    """A shell result in a few words: how it exited and its output's one line, or how many
    lines it has (None: not a shell result)."""
    if (result := shell_result(text)) is None:
        return None
    out = result.stdout.strip("\n")
    said = f"exited {result.exit_code}"
    if not out:
        return said + " with no output."
    lines = out.count("\n") + 1
    return f"{said}: {_short(out, 80)}" if lines == 1 else f"{said} ({lines} lines of output)."


def _args(name: str, m: re.Match[str]) -> dict[str, Any] | None:
    """The arguments of one rule match, or None when the match is not usable."""
    g = {k: v for k, v in m.groupdict().items() if v is not None}
    if name == "write_file":
        text = g.get("dq", g.get("sq", g.get("raw", "")))
        path = g["path"].rstrip(_TRAIL)
        return {"text": text, "path": path} if path else None
    if name == "read_file":
        path = g["path"].strip("'\"").rstrip(_TRAIL)
        return {"path": path} if path else None
    if name == "list_dir":
        return {"path": g.get("path", ".").strip("'\"").rstrip(_TRAIL) or "."}
    if name == "http_get":
        url = g["url"].strip("<>'\"").rstrip(_TRAIL)
        return {"url": url} if url else None
    if name == "calc":
        expr = g["expr"].strip().rstrip("?").strip()
        return {"expression": expr} if expr else None
    return {}  # clock


def parse_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a user text asks for, in the order they appear in it."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    claimed: list[tuple[int, int]] = []
    for m in _BACKTICK.finditer(text):
        if cmd := m.group(1).strip():
            found.append((m.start(), "shell", {"command": cmd}))
    masked = _BACKTICK.sub(lambda m: _MASK * len(m.group(0)), text)
    # Earlier rules claim their span: "write the date to x" is one write, not a clock too.
    for name, pattern in _RULES:
        for m in pattern.finditer(masked):
            if _MASK in m.group(0) or any(m.start() < e and s < m.end() for s, e in claimed):
                continue
            args = _args(name, m)
            if args is not None:
                claimed.append(m.span())
                found.append((m.start(), name, args))
    calls: list[tuple[str, dict[str, Any]]] = []
    for _, name, args in sorted(found, key=lambda f: f[0]):
        if (name, args) not in calls:  # "date and time" is one clock call
            calls.append((name, args))
    return calls


KEPT_TALLIES = 32  # conversations whose tally the model keeps (see `_Tally`)


@dataclass
class _Tally:
    """What the model reads of a request's messages besides its newest: their words, how
    many answers there were, where the newest user message and the newest call are.

    A thread's requests grow by appending, so the tally of the previous one is carried
    on and only the new messages are read: a step costs the same at message 800 as at 5
    (the previous messages are checked unchanged by a comparison of the two lists, which
    is of references, done in C). Anything else is read whole, with the same result."""

    messages: list[ConvMessage]  # the messages read (a copy of the request's)
    words: int = 0  # their words, tool calls' JSON arguments included
    answers: int = 0  # assistant messages
    user: int = -1  # the index of the newest user message (-1: none)
    calls: int = -1  # the index of the newest assistant message with tool calls

    def read(self, msgs: list[ConvMessage], start: int) -> None:
        """Fold in msgs[start:], the messages appended since the tally was made."""
        words = self.words
        for i in range(start, len(msgs)):
            m = msgs[i]
            words += _words(m.text)
            if m.tool_calls:
                words += sum(_words(json.dumps(c.arguments)) for c in m.tool_calls)
            if m.role == "assistant":
                self.answers += 1
                if m.tool_calls:
                    self.calls = i
            elif m.role == "user":
                self.user = i
        self.words = words
        self.messages = list(msgs)


class OfflineModel:
    """A Provider that needs no network and no weights: rules over the conversation."""

    name = "offline"
    model = "offline-rules-1"

    def __init__(self, delay: float = 0.0, chunk_chars: int = 4, model: str | None = None) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        self.delay = delay
        self.chunk_chars = chunk_chars
        if model:  # a name of its own (a group's offline model told apart from the room's)
            self.model = model
        self._tallies: OrderedDict[int, _Tally] = OrderedDict()  # by their first message's id

    def _tally(self, msgs: list[ConvMessage]) -> _Tally:
        """The tally of `msgs`: the one of a request they extend, carried on, else new."""
        if not msgs:
            return _Tally([])
        key = id(msgs[0])
        tally = self._tallies.get(key)
        if tally is not None:
            self._tallies.move_to_end(key)
            seen = len(tally.messages)
            # (a list compares its items by identity first: the same messages cost a
            # pointer each; others compare by value, and equal ones read alike)
            if seen <= len(msgs) and msgs[:seen] == tally.messages:
                tally.read(msgs, seen)
                return tally
        tally = self._tallies[key] = _Tally([])
        tally.read(msgs, 0)
        while len(self._tallies) > KEPT_TALLIES:
            self._tallies.popitem(last=False)
        return tally

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        for i, event in enumerate(self.events(request)):
            if i and self.delay > 0 and isinstance(event, TextDelta | ToolCallDelta):
                await anyio.sleep(self.delay)
            yield event

    # The whole reply is decided up front, synchronously; `stream` only paces it.
    def events(self, request: ModelRequest) -> list[ModelEvent]:
        """Every event the reply to `request` streams, in order."""
        msgs = request.messages
        tally = self._tally(msgs)
        calls: list[tuple[str, dict[str, Any]]] = []
        user_text = _asked(msgs[-1].text) if msgs and msgs[-1].role == "user" else ""
        if request.purpose == "plan":
            text = self._plan(user_text)
        elif request.purpose == "summary":
            text = summarised(user_text)
        elif user_text.startswith(ACTION_RESULTS):
            text = self._quote_action_results(user_text)
        elif msgs and msgs[-1].role == "tool":
            text = self._answer(msgs, tally.calls)
        else:
            user = _asked(msgs[tally.user].text if tally.user >= 0 else "")
            available = {t.get("name") for t in request.tools}
            wanted = parse_calls(user)
            if not wanted and _ASKS_INSTRUCTIONS.search(user):
                return self._finish(request, told(request.system), [], tally)
            calls = [c for c in wanted if c[0] in available]
            missing = list(dict.fromkeys(n for n, _ in wanted if n not in available))
            notes = [
                f"The `{n}` tool is not available here, so I can't {_WHAT[n]}." for n in missing
            ]
            if calls:
                notes.insert(0, f"Running {len(calls)} tool{'s' if len(calls) > 1 else ''}.")
            text = " ".join(notes) if wanted else FALLBACK

        return self._finish(request, text, calls, tally)

    def _finish(self, request: ModelRequest, text: str, calls: list[tuple[str, dict[str, Any]]],
                tally: _Tally) -> list[ModelEvent]:  # fmt: skip
        """The reply's events: its text in pieces, its calls, usage, the stop."""
        msgs = request.messages
        events: list[ModelEvent] = [TextDelta(text=t) for t in self._chunks(text)]
        prefix = self._id_prefix(msgs, tally)
        out_words = _words(text)
        for i, (name, args) in enumerate(calls):
            raw = json.dumps(args, ensure_ascii=False)
            out_words += 1 + _words(raw)
            pieces = self._split(raw)
            events.append(
                ToolCallDelta(index=i, id=f"{prefix}_{i}", name=name, arguments=pieces[0])
            )
            events.extend(ToolCallDelta(index=i, arguments=p) for p in pieces[1:])
        in_words = _words(request.system or "") + tally.words
        events.append(UsageEvent(input_tokens=in_words, output_tokens=out_words))
        events.append(StopEvent(reason="tool_use" if calls else "end_turn"))
        return events

    @staticmethod
    def _plan(state_text: str) -> str:
        """A planner's answer: the user's requests as commands, once; then "response"."""
        try:
            state = json.loads(state_text)
        except json.JSONDecodeError:
            state = {}
        if not isinstance(state, dict) or state.get("done_plans"):
            return json.dumps({"next_action": "response", "execution_commands": []})
        available = {t.get("name") for t in state.get("available_tools", [])}
        commands = [
            {"purpose": f"{_WHAT[name][0].upper()}{_WHAT[name][1:]}", "tool_name": name,
             "tool_kwargs": args, "todo_suggestion": "answer with the result"}
            for name, args in parse_calls(str(state.get("user_input", "")))
            if name in available
        ]  # fmt: skip
        action = "execute" if commands else "response"
        return json.dumps({"next_action": action, "execution_commands": commands})

    @staticmethod
    def _quote_action_results(text: str) -> str:
        """The final answer of plan_execute: one line per action result."""
        body = text.removeprefix(ACTION_RESULTS).split("\n\n", 1)[0]
        try:
            results = json.loads(body)
        except json.JSONDecodeError:
            return "I could not read the action results."
        lines = []
        for purpose, r in results.items():
            outcome = r.get("result") if r.get("success") else r.get("error")
            verb = "done" if r.get("success") else "failed"
            lines.append(f"{purpose} ({r.get('tool_name')}, {verb}): {_short(str(outcome))}")
        return "\n".join(lines) or "Nothing was done."

    @staticmethod
    def _answer(msgs: list[ConvMessage], start: int) -> str:
        """Quote the tool results that arrived since the last assistant message with calls
        (`start`: its index, -1 if none)."""
        order = [c.id for c in msgs[start].tool_calls] if start >= 0 else []
        names = {c.id: c.name for c in msgs[start].tool_calls} if start >= 0 else {}
        latest: dict[str | None, ConvMessage] = {}
        for m in msgs[start + 1 :]:
            if m.role == "tool":
                latest.pop(m.tool_call_id, None)  # a later result replaces a placeholder
                latest[m.tool_call_id] = m
        ranked = sorted(
            latest.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)
        )
        lines = []
        for cid, m in ranked:
            tool = m.tool_name or names.get(cid or "") or "tool"
            if m.pending:
                lines.append(f"`{tool}` is still waiting for an operator decision.")
            elif m.is_error:
                detail = _short(m.text.removeprefix("error: "))
                lines.append(f"`{tool}` failed: {detail or '(no details)'}")
            elif (shell := _shell_said(m.text)) is not None:  # said, not quoted whole:
                lines.append(f"`{tool}` {shell}")  # the console shows the output itself
            else:
                lines.append(f"`{tool}` returned: {_short(m.text) or '(nothing)'}")
        return "\n".join(lines) or "The tools returned nothing."

    @staticmethod
    def _id_prefix(msgs: list[ConvMessage], tally: _Tally) -> str:
        """`call_<hash>_<n>`: n grows with every assistant message, so ids never repeat."""
        user = _asked(msgs[tally.user].text if tally.user >= 0 else "")
        digest = hashlib.sha256(user.encode()).hexdigest()[:6]
        return f"call_{digest}_{tally.answers + 1}"

    def _chunks(self, text: str) -> list[str]:
        """`text` in pieces of about chunk_chars characters, cut after whitespace."""
        pieces: list[str] = []
        current = ""
        for token in re.findall(r"\S+\s*|\s+", text):
            current += token
            if len(current) >= self.chunk_chars:
                pieces.append(current)
                current = ""
        if current:
            pieces.append(current)
        return pieces

    @staticmethod
    def _split(raw: str) -> list[str]:
        """JSON arguments in two or three pieces; only the first may be empty."""
        a = max(1, len(raw) // 3)
        b = max(a, 2 * len(raw) // 3)
        return [raw[:a]] + [p for p in (raw[a:b], raw[b:]) if p]
