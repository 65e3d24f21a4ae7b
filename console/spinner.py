"""What shows that something runs: a spinner frame and the time it has run, redrawn
FPS times a second while a turn runs (and not at all otherwise)."""

from __future__ import annotations

from console.format import visible
from console.state import CallRow, DeckState
from engine.lifecycle import CallStatus, TurnStatus

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FPS = 8  # frames a second: smooth enough to see, cheap enough to leave on


def spin(frame: int) -> str:
    return FRAMES[frame % len(FRAMES)]


def ran(seconds: float) -> str:
    """How long something has run: 3s, 1m05s, 2h03m."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def thread_activity(state: DeckState, thread_id: str, now: float, frame: int) -> str:
    """What runs in `thread_id` now, for the chat's end: its running call (`running 3s · $ make`:
    the time first, so a long command cut at the edge never hides it; since
    it started running: a call waits first, and its `updated_at` is when it began to run),
    else its turn thinking; "" when nothing runs there."""
    from console.tool_lines import header

    turn = state.active_turn(thread_id)
    if turn is None or turn.status != TurnStatus.RUNNING:
        return ""
    calls = running_calls(state, thread_id)
    if calls:
        call = calls[0]
        more = f" (+{len(calls) - 1} more)" if len(calls) > 1 else ""
        return f"{spin(frame)} running {ran(now - call.updated_at)}{more} · {visible(header(call))}"
    return f"{spin(frame)} thinking · {ran(now - turn.started_at)}"


def running_calls(state: DeckState, thread_id: str) -> list[CallRow]:
    """The calls of the thread's running turn that run now, in order."""
    turn = state.active_turn(thread_id)
    if turn is None or turn.status != TurnStatus.RUNNING:
        return []
    return [c for c in state.calls_of(turn.turn_id) if c.status == CallStatus.RUNNING]


def thread_output(state: DeckState, thread_id: str, lines: int) -> list[tuple[str, str]]:
    """The last `lines` lines its running call printed (console/call_output.py), for the
    chat's end under its spinner: (stream, text) with stream stdout, stderr or skipped."""
    calls = running_calls(state, thread_id)
    tail = state.output.get(calls[0].call_id) if calls else None
    return tail.last(lines) if tail is not None else []


def room_activity(state: DeckState, now: float, frame: int) -> str:
    """The spinner and how long the oldest running turn has run, for the status bar."""
    oldest = state.oldest_running()
    return f"{spin(frame)} {ran(now - oldest.started_at)}" if oldest is not None else ""
