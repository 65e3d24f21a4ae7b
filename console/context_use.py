"""How full each thread's context is: the input tokens its newest inference was counted at
(by the provider) against the window of the model that answered it, as the chat title,
the threads list and the status bar show it."""

from __future__ import annotations

from console.state import DeckState

WARN = 0.8  # of the window: where compaction begins (engine/turn/window.py), and the warning
CELLS = 5


def gauge(tokens: int, window: int | None) -> str:
    """`▰▰▱▱▱ 41% of 16k` (without a known window: the tokens alone)."""
    if not window:
        return f"{short(tokens)} tokens"
    share = tokens / window
    full = min(CELLS, round(share * CELLS))
    return f"{'▰' * full}{'▱' * (CELLS - full)} {share:.0%} of {short(window)}"


def short(n: int) -> str:
    """16384 -> 16k, 1047576 -> 1M, 900 -> 900."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.3g}M"
    if n >= 1000:
        return f"{n / 1000:.3g}k"
    return str(n)


def near(tokens: int, window: int | None) -> bool:
    """Whether a thread nears its window (compaction comes with its next request)."""
    return bool(window) and tokens >= WARN * window  # type: ignore[operator]


def thread_context(state: DeckState, thread_id: str) -> str:
    """The chat title's words on its thread: how full its context was at its newest
    inference, then the model that answered it (cut first in a narrow title); "" before
    any."""
    used = state.context.get(thread_id)
    if used is None:
        return ""
    tokens, window, model = used
    said = gauge(tokens, window)
    return f"{said} · {model.split(':', 1)[-1]}" if model else said


def nearest(state: DeckState) -> str:
    """The status bar's warning: the fullest thread near its window ("" none)."""
    near_ones = [(tokens / window, thread) for thread, (tokens, window, _) in state.context.items()
                 if window and near(tokens, window)]  # fmt: skip
    if not near_ones:
        return ""
    share, thread = max(near_ones)
    more = f" (+{len(near_ones) - 1})" if len(near_ones) > 1 else ""
    return f"{thread} at {share:.0%} of its context{more}"
