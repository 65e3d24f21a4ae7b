"""The screens the main screen opens by a key, each loaded when first opened (most
sessions open few of them, and the console starts faster without them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.screen import Screen

from console.bridge import Bridge


def open_screen(name: str, bridge: Bridge, clock: Callable[[], float], room: Any,
                thread_id: str = "") -> Screen[Any]:  # fmt: skip
    """The screen `name` (scheduler, rules, breakpoints, channels, rooms, review, history,
    tools, or the instructions of `thread_id`, the thread the chat shows), made."""
    if name == "scheduler":
        from console.screens.scheduler import SchedulerScreen

        return SchedulerScreen(bridge, clock)
    if name == "rules":
        from console.screens.rules import RulesScreen

        return RulesScreen(bridge, clock)
    if name == "breakpoints":
        from console.screens.breakpoints import BreakpointsScreen

        return BreakpointsScreen(bridge, thread_id, getattr(room, "workspace", None))
    if name == "channels":
        from console.screens.channels import ChannelsScreen

        return ChannelsScreen(bridge, clock)
    if name == "rooms":
        from console.screens.rooms import RoomsScreen

        return RoomsScreen(clock, getattr(room, "path", None))
    if name == "review":
        from console.screens.review import ReviewScreen

        return ReviewScreen(bridge)
    if name == "history":
        from console.screens.history import HistoryScreen

        return HistoryScreen(room, clock=clock, bridge=bridge)
    if name == "tools":
        from console.screens.tools import ToolsScreen

        return ToolsScreen(bridge)
    if name == "instructions":
        from console.screens.instructions import InstructionsScreen

        return InstructionsScreen(bridge, thread_id)
    raise ValueError(f"no screen {name!r}")
