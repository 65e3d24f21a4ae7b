"""Fork and replay from the console (issue 37): the dialog `F` on a step or `P` on a turn
opens (console/travel.py's messages, in the live timeline or in history), and what follows.

A fork (console/screens/fork.py) makes a thread from the record up to the step; the chat
then shows the new thread (from history too: the main screen below it switches, and a
notice says where it is). A replay (console/screens/replay.py) answers the turn's message
again in a scratch thread on its recorded results; a notice says where, and once the
replay's turn has ended (or stopped for a decision: said, then followed until it ends)
the operator is offered the diff of the replay and its original (console/screens/diff.py).
Both go through the room's client (the bridge's `api`), hosted or attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from console.groups import GROUPS, group_of
from console.travel import ForkAt, ReplayOf

if TYPE_CHECKING:
    from console.bridge import Bridge
    from engine.domain.forks import Forked

OUTCOME_WAIT = 30.0  # seconds of one wait for the replay's turn to stop running
WAITING_LOOK = 2.0  # seconds between looks at a replay that waits for a decision


async def groups_of(bridge: Bridge, current: str) -> list[str]:
    """The room's thread groups as its scheduler says them (the usual four while it
    cannot be asked), `current` among them."""
    try:
        stats = await bridge.statistics()
    except Exception:  # the owner went away meanwhile: the usual groups
        stats = None
    names = [g.name for g in stats.groups] if stats is not None else list(GROUPS)
    return names if current in names else [current, *names]


async def fork_at(app: Any, ask: ForkAt) -> None:
    """Open the fork dialog; the new thread in the chat once it is made."""
    from console.screens.fork import ForkScreen

    bridge: Bridge = app.bridge
    if bridge.client is None:
        app.notify("No runtime is reachable: a fork needs one.", severity="error", title="Fork")
        return
    group = group_of(ask.thread_id, ask.group)
    screen = ForkScreen(app.room, ask.turn_id, ask.step_id, ask.thread_id, group,
                        await groups_of(bridge, group), bridge.api.fork)  # fmt: skip
    made: Forked | None = await app.push_screen_wait(screen)
    if made is None:
        return
    started = f"; turn {made.turn_id} started" if made.turn_id else "; it waits for a message"
    where = "the chat shows it" if app.screen is app.main else "the chat shows it (q: back)"
    await app.main.switch_thread(made.thread_id)
    app.notify(f"{made.thread_id}: {made.origin()}{started}; {where}.", title="Forked")


async def replay_of(app: Any, ask: ReplayOf) -> None:
    """Open the replay dialog; say where the replay runs, and offer the diff when it ends."""
    from console.screens.replay import ReplayScreen

    bridge: Bridge = app.bridge
    if bridge.client is None:
        app.notify("No runtime is reachable: a replay needs one.", severity="error",
                   title="Replay")  # fmt: skip
        return
    group = group_of(ask.thread_id, ask.group)
    screen = ReplayScreen(ask.turn_id, ask.thread_id, group, await groups_of(bridge, group),
                          bridge.api.replay)  # fmt: skip
    made: Forked | None = await app.push_screen_wait(screen)
    if made is None or made.turn_id is None:
        return
    app.notify(f"Turn {made.turn_id} on {made.thread_id}: {made.origin()}. The diff is offered "
               "when it ends.", title="Replaying")  # fmt: skip
    status = await ended(app, made.turn_id)
    if status is None:
        return
    await offer_diff(app, made, status)


async def ended(app: Any, turn_id: str) -> str | None:
    """How the replay's turn ended (its status and reason), once it has; None when the
    runtime went away first. A turn waiting for a decision is said, and followed until it
    ends."""
    bridge: Bridge = app.bridge
    said_waiting = False
    while True:
        try:
            outcome = await bridge.api.outcome(turn_id, wait=OUTCOME_WAIT)
        except Exception:  # the owner went away: nothing to offer
            return None
        if outcome.status == "done":
            return f"done/{outcome.reason}" if outcome.reason else "done"
        if outcome.status == "waiting":
            if not said_waiting:
                said_waiting = True
                app.notify(f"The replay's turn {turn_id} waits for a decision (a call unlike "
                           "the record's): decide it in the queue.", title="Replay waits")  # fmt: skip
            await anyio.sleep(WAITING_LOOK)


async def offer_diff(app: Any, made: Forked, status: str) -> None:
    """Ask whether to open the diff of the replay and its original (No by default)."""
    from console.screens.confirm import ConfirmScreen
    from console.screens.diff import DiffScreen

    assert made.turn_id is not None
    question = f"The replay of {made.from_turn} ended ({status}). Open the diff?"
    body = f"A: {made.from_turn} (the original)\nB: {made.turn_id} (the replay, {made.thread_id})"
    if await app.push_screen_wait(ConfirmScreen(question, body, yes="Open the diff",
                                                no="Not now")):  # fmt: skip
        await app.push_screen(DiffScreen(app.room, made.from_turn, made.turn_id))
