"""The console's keys, in one registry: where each screen's and pane's bindings live, and
under which heading the help screen and the command palette show them.

A key is declared once, as a Textual `Binding` in the `BINDINGS` of the screen or widget
it acts on (which gives the binding and its footer entry). This table names those classes,
so the help screen (`?`) lists every section's keys and the palette (ctrl+p) offers every
binding with a description of the screen on top and of the panes on it, titled
"Prefix: Description" (a screen's `close` is "Close prefix"). A new binding shows up in
the footer, the help and the palette with no code of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widget import Widget

# Actions that move within a list: keys, not commands.
# Not offered in the palette: moves, and keys that only mean something right after another
# (the Esc that stops the chat's turn follows the Esc that left the chat).
NOT_COMMANDS = {"cursor", "cursor_down", "cursor_up", "first", "last", "stop_armed"}


@dataclass(frozen=True)
class Keys:
    """The bindings of one class ("module:Class"), and the palette's prefix for them."""

    owner: str
    prefix: str = ""

    def cls(self) -> type[DOMNode]:
        module, name = self.owner.split(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Section:
    """A heading of the help screen, and the classes whose keys it lists."""

    title: str
    keys: tuple[Keys, ...]


SECTIONS = (
    Section("Everywhere", (Keys("console.app:AgentDeck"), Keys("console.screens.main:MainScreen"))),
    Section("Chat", (Keys("console.widgets.chat_pane:ChatPane", "Chat"),)),
    Section("Decision card (in the chat)", (Keys("console.widgets.decision_card:DecisionCard", "Card"),)),
    Section("Timeline", (Keys("console.widgets.timeline:Timeline", "Timeline"),)),
    Section("Calls", (Keys("console.widgets.calls_table:CallsTable", "Calls"),)),
    Section("Decisions", (Keys("console.widgets.decision_queue:DecisionQueue", "Decisions"),)),
    Section("Filter", (Keys("console.widgets.filter_bar:FilterBar", "Filter"),)),
    Section("Scheduler", (Keys("console.screens.scheduler:SchedulerScreen", "Scheduler"),
                          Keys("console.widgets.groups_table:GroupsTable", "Scheduler"))),
    Section("Rules", (Keys("console.screens.rules:RulesScreen", "Rules"),
                      Keys("console.widgets.rules_table:RulesTable", "Rules"))),
    Section("Breakpoints (b)", (Keys("console.screens.breakpoints:BreakpointsScreen", "Breakpoints"),
                                Keys("console.widgets.breakpoints_table:BreakpointsTable", "Breakpoints"))),
    Section("Channels", (Keys("console.screens.channels:ChannelsScreen", "Channels"),
                         Keys("console.widgets.channel_tables:DeliveriesTable", "Deliveries"))),
    Section("Rooms and their inbox (o)", (Keys("console.screens.rooms:RoomsScreen", "Rooms"),
                                          Keys("console.widgets.rooms_table:RoomsTable", "Rooms"))),
    Section("Tools (T)", (Keys("console.screens.tools:ToolsScreen", "Tools"),)),
    Section("History", (Keys("console.screens.history:HistoryScreen", "History"),
                        Keys("console.widgets.history_list:HistoryList", "History"),
                        Keys("console.widgets.history_notes:HistoryNotes", "History"))),
    Section("Diff (m, d in history)", (Keys("console.screens.diff:DiffScreen", "Diff"),
                                       Keys("console.widgets.diff_view:DiffView", "Diff"),
                                       Keys("console.screens.diff_row:DiffRowScreen", "Diff row"))),
    Section("Review after a crash", (Keys("console.screens.review:ReviewScreen", "Review"),)),
    Section("Instructions (I)", (Keys("console.screens.instructions:InstructionsScreen", "Instructions"),)),
    Section("Call details", (Keys("console.screens.call_detail:CallDetailScreen", "Details"),)),
    Section("Remember (A, R)", (Keys("console.screens.remember:RememberScreen", "Remember"),)),
    Section("Editing", (Keys("console.screens.compose:ComposeScreen", "Compose"),
                        Keys("console.screens.edit_args:EditArgsScreen", "Edit"),
                        Keys("console.screens.editor:EditorScreen", "Editor"),
                        Keys("console.screens.fork:EntryEditor", "Fork entry"),
                        Keys("console.screens.instructions:InstructionsEditor", "Instructions"))),
    Section("Dialogs", (Keys("console.screens.confirm:ConfirmScreen", "Dialog"),
                        Keys("console.screens.prompt:PromptScreen", "Prompt"),
                        Keys("console.screens.daily_budget:DailyBudgetScreen", "Budget"),
                        Keys("console.screens.set_breakpoint:SetBreakpointScreen", "Breakpoint"),
                        Keys("console.screens.threads:ThreadPickerScreen", "Threads"),
                        Keys("console.screens.fork:ForkScreen", "Fork"),
                        Keys("console.screens.replay:ReplayScreen", "Replay"),
                        Keys("console.screens.help:HelpScreen", "Help"))),
)  # fmt: skip


def bindings(items: Iterable[object]) -> list[Binding]:
    return [b for b in items if isinstance(b, Binding) and b.description]


def help_sections() -> list[tuple[str, list[Binding]]]:
    """Every section with its keys, for the help screen (a binding inherited by several
    classes of one section is listed once)."""
    out = []
    for section in SECTIONS:
        seen: list[Binding] = []
        for keys in section.keys:
            seen += [b for b in bindings(keys.cls().BINDINGS) if b not in seen]
        out.append((section.title, seen))
    return out


def _prefixes() -> dict[type[DOMNode], str]:
    return {keys.cls(): keys.prefix for section in SECTIONS for keys in section.keys}


Command = tuple[str, str, Callable[[], Any]]


def commands(
    nodes: Iterable[Widget | App[Any]], skip: frozenset[str] = frozenset()
) -> Iterator[Command]:
    """(title, help, callback) for the palette: each binding with a description of each of
    `nodes` whose class is in the registry, but those whose action is in `skip`."""
    prefixes = _prefixes()
    for node in nodes:
        prefix = prefixes.get(type(node))
        if prefix is None:
            continue
        for b in bindings(type(node).BINDINGS):
            name = b.action.split("(")[0]
            if name in NOT_COMMANDS or name in skip:
                continue
            if name == "close":
                title = f"Close {prefix.lower()}"
            else:
                title = f"{prefix}: {b.description}" if prefix else b.description
            key = b.key.split(",")[0]
            yield title, b.tooltip or f"key {key}", partial(node.run_action, b.action)
