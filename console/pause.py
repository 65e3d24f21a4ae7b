"""A breakpoint's pause as the console shows and decides it.

A turn paused at a breakpoint (engine/domain/breakpoints.py) waits on a suspended call of
the pseudo-tool `breakpoint`, awaiting `breakpoint`; its arguments say what it paused on:
the messages the model has not read yet (`at` inference), the calls it holds before they
run (`call`) or the results it holds out of the conversation (`result`). The queue, the
card and the detail view show those (text from the model, a tool or a user: drawn as
text, never markup), and their keys mean other things there: the approve key continues,
`n` steps (one inference or one tool round, then it pauses again), the edit key edits
what it paused on and continues, and the cancel key ends the whole turn (after a
confirmation). The other decision keys (use a result, remember, the sandbox's) are not
offered for a pause.
"""

from __future__ import annotations

from typing import Any

from textual.content import Content

from console.call_args import Section, shown_args
from console.format import one_line, visible
from console.glyphs import look
from console.state import CallRow

BREAKPOINT = "breakpoint"  # the pseudo-tool of a pause (engine.domain.breakpoints)
# A pause's own decision actions, and what each key's action is called on a pause.
PAUSE_ACTIONS = frozenset({"continue", "step", "edit_pause", "end_turn"})
ON_PAUSE = {"approve": "continue", "edit": "edit_pause", "cancel": "end_turn"}
ALWAYS = frozenset({"details"})
WHERE = {"inference": "before an inference", "call": "before calls", "result": "after results"}
WORDS = {"continue": "Continue from", "step": "Step from", "edit_pause": "Edit and continue from",
         "end_turn": "End the turn at"}  # fmt: skip
END_TURN = ("Cancel at this breakpoint? The whole turn ends (cancelled): nothing it holds "
            "runs, and the model is not asked again.")  # fmt: skip


def is_pause(call: CallRow | None) -> bool:
    """Whether `call` is a breakpoint's pause (waiting, or one that was)."""
    return call is not None and call.tool == BREAKPOINT and call.awaiting in (BREAKPOINT, None)


def offered(action: str, pause: bool) -> bool:
    """Whether a decision key's `action` is offered for a call (`pause`: a pause)."""
    if action in ALWAYS:
        return True
    return (action in PAUSE_ACTIONS) == pause


def _args(call: CallRow) -> dict[str, Any]:
    return call.args if isinstance(call.args, dict) else {}


def where(call: CallRow) -> str:
    """Where it paused: "before an inference", "before calls", "after results"."""
    return WHERE.get(str(_args(call).get("at")), "at a breakpoint")


def headline(call: CallRow) -> str:
    """The card's title: ⏸ paused before calls · chat:main."""
    return f"⏸ paused {where(call)} · {call.thread_id}"


def _entries(call: CallRow, part: str) -> list[dict[str, Any]]:
    return [e for e in _args(call).get(part) or () if isinstance(e, dict)]


def summary(call: CallRow, limit: int = 2_000) -> str:
    """What it paused on, on one line (the queue's row): before calls: shell $ ls -la."""
    at = _args(call).get("at")
    if at == "inference":
        held = [f"{e.get('role', '?')}: {e.get('text', '')}" for e in _entries(call, "messages")]
    elif at == "call":
        held = [f"{e.get('tool', '?')} {_call_args(e)}" for e in _entries(call, "calls")]
    elif at == "result":
        held = [f"{e.get('tool', '?')} → {_outcome(e)}" for e in _entries(call, "calls")]
    else:
        held = [one_line(call.args, limit)]
    text = f"{where(call)}: " + " · ".join(held) if held else where(call)
    return one_line(text, limit)


def _call_args(entry: dict[str, Any]) -> str:
    args = entry.get("args")
    if entry.get("tool") == "shell" and isinstance(args, dict):
        if isinstance(command := args.get("command"), str):
            return f"$ {command}"
    return one_line(args, 200)


def _outcome(entry: dict[str, Any]) -> str:
    if entry.get("error"):
        return f"error: {entry['error']}"
    result = entry.get("result")
    return result if isinstance(result, str) else one_line(result, 200)


def sections(call: CallRow, workspace: Any = None) -> list[Section]:
    """What it paused on, whole, as the card and the detail view show it: each pending
    message, each held call's arguments (as that tool's are shown), each held result."""
    at = _args(call).get("at")
    out: list[Section] = []
    if at == "inference":
        for e in _entries(call, "messages"):
            label = f"{e.get('role', '?')} message {e.get('seq', '?')}, not read by the model yet"
            out.append((visible(label), _text(e.get("text"))))
    elif at == "call":
        for e in _entries(call, "calls"):
            tool = str(e.get("tool", "?"))
            for n, (label, body) in enumerate(shown_args(tool, e.get("args"), workspace)):
                name = f"{tool} ({e.get('call_id', '?')}), held before it runs"
                if tool == "shell" and label == "command":
                    body = Content.styled("$ ", "bold $warning") + body
                out.append((visible(name if n == 0 and label in ("command", "arguments")
                                    else f"{name}: {label}"), body))  # fmt: skip
    elif at == "result":
        for e in _entries(call, "calls"):
            state = look(str(e.get("status", "?")))
            name = f"{e.get('tool', '?')} ({e.get('call_id', '?')}) {state.glyph} {state.word}"
            if e.get("error"):
                out.append((visible(f"{name}: its error, held"), _text(e.get("error"))))
            else:
                out.append((visible(f"{name}: its result, held"), _text(e.get("result"))))
    if not out:
        out.append(("arguments", _text(one_line(call.args, 2_000))))
    return out


def _text(value: Any) -> Content:
    """Text from outside as shown: never markup, control characters escaped."""
    text = value if isinstance(value, str) else one_line(value, 2_000)
    return Content(visible(text, lines=True)) if text else Content.styled("(empty)", "italic")


def editable(args: Any) -> str:
    """What the editor may change of a pause with `args`, in words."""
    at = args.get("at") if isinstance(args, dict) else None
    return {"inference": "the messages' text", "call": "the held calls' arguments",
            "result": "the held results"}.get(str(at), "what it holds")  # fmt: skip
