"""Hostile text from outside, everywhere it reaches the console (issue 25): any string, as a
thread id, a message's text, sender and channel, a waiting call's arguments (in the queue
and on its details), a notice, a task file's name, never ends the app (a `MarkupError`
ended every console at start) and never reaches the terminal as a raw control character.

The real app runs over a real room (SQLite, the offline model), one app per test: Pilot
apps take seconds to start, so each example feeds its strings to the app already running.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.notifications import Notify
from textual.pilot import Pilot

from console.app import AgentDeck
from console.screens.call_detail import CallDetailScreen
from console.widgets.decision_queue import DecisionQueue
from engine.domain.messages import Message
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, started, told, until
from tests.console.test_hostile_text import raw_controls, screen_text

# Strings are long on purpose (20,000 characters): hypothesis may say their repr is large
# as it reports a failure, which must not hide the failure itself.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
    ),
]

# An example feeds the app several strings and draws four screens, seconds of work: a tenth
# of the profile's examples (10 in CI, 300 in a long run).
PILOTED = settings(
    max_examples=max(6, settings.default.max_examples // 10),
    suppress_health_check=[*settings.default.suppress_health_check,
                           HealthCheck.function_scoped_fixture],
)  # fmt: skip

MARKUP = st.sampled_from([
    "[/]", "[/bold]", "[bold]", "[/x]", "[b", "]", "[[", "\\[", "[@click=app.quit]",
    "[@click=app.quit]q[/]", "[link=http://x]l[/link]", "[link=javascript:alert(1)]",
    "[red on #zzz]", "[$accent]", "[on]", "[@click=screen.dismiss('x')]", ":smile:",
    "$text", "%s", "{0}", "[/link]", "[i]unclosed",
])  # fmt: skip
CONTROLS = st.characters(min_codepoint=0, max_codepoint=0x1F) | st.characters(
    min_codepoint=0x7F, max_codepoint=0x9F
)
ESCAPES = st.sampled_from([
    "\x1b[2J", "\x1b[31m", "\x1b]0;owned\x07", "\x1b]8;;http://x\x1b\\l\x1b]8;;\x1b\\",
    "\x1b[?1049h", "\x1bc", "\x1bP+q\x1b\\", "\x9b31m", "\x9d0;t\x9c", "\r\x1b[K", "\x1b",
])  # fmt: skip
BIDI = st.sampled_from([chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))])
COMBINING = st.characters(categories=["Mn", "Me"])
ODD = st.sampled_from(["\u200b", "\ufeff", "\u2028", "\u2029", "🦜", "の", "\t", "\n", "é"])
piece = MARKUP | CONTROLS | ESCAPES | BIDI | COMBINING | ODD | st.text(max_size=6)
hostile = st.one_of(
    st.lists(piece, min_size=1, max_size=12).map("".join),
    st.tuples(piece, st.integers(300, 3000)).map(lambda t: (t[0] * t[1])[:20_000]),  # long
    st.lists(COMBINING, min_size=1, max_size=3).map("".join),  # lone combining marks
)
SCREENS = st.sampled_from([
    ("h", "HistoryScreen"), ("s", "SchedulerScreen"), ("r", "RulesScreen"),
    ("l", "ChannelsScreen"), ("ctrl+t", "ThreadPickerScreen"), ("o", "RoomsScreen"),
])  # fmt: skip


def shell_safe(text: str) -> str:
    """`text` as the offline model takes it between backticks (no backtick, no newline)."""
    return text.replace("`", "'").replace("\n", "\x0b")


def file_safe(text: str) -> str:
    """`text` as a file name can hold it (no '/', no NUL, at most 200 bytes)."""
    name = text.replace("/", "|").replace("\x00", "\x01")
    while len(name.encode("utf-8", "surrogatepass")) > 200:
        name = name[: len(name) // 2]
    return name


@dataclass
class Deck:
    """The app every example feeds, and what the examples fed it so far (the app keeps it
    all: an example that finds it ended names the ones before it)."""

    pilot: Pilot
    recorder: Recorder  # the Notify messages: what the console told the operator
    fed: list[list[str]] = field(default_factory=list)

    def alive(self, where: str) -> None:
        app = self.pilot.app
        host = app.host  # type: ignore[attr-defined]
        assert app.is_running and host.runtime is not None, (
            f"the app ended at {where} ({host.error!r}, exit {app.return_code}); "
            f"fed last: {self.fed[-2:]!r}"
        )


async def drawn_clean(deck: Deck, where: str) -> None:
    """The app still runs, and what the terminal is sent for the screen on top holds no
    raw control character."""
    await deck.pilot.pause()
    deck.alive(where)
    shown = screen_text(deck.pilot)
    assert raw_controls(shown) == [], f"{where}: raw {raw_controls(shown)} for {deck.fed[-1]!r}"


@pytest.fixture
async def deck(tmp_path: Path) -> AsyncIterator[Deck]:
    """The real console over a room whose pulse loop looks at tasks/ often."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text("[pulse]\ninterval = 0.05\n")
    app: AgentDeck = build(room)
    recorder = Recorder(Notify)
    # notifications drawn as toasts (run_test leaves them out by default)
    async with app.run_test(size=SIZE, message_hook=recorder, notifications=True) as pilot:
        await started(pilot)
        yield Deck(pilot, recorder)


N = itertools.count()  # a thread and a task of their own for each string


@PILOTED
@given(
    strings=st.lists(hostile, min_size=1, max_size=3),
    chat=st.sampled_from(["", "chat:", "task:"]),  # whose chat is shown
    screen=SCREENS,
)
async def test_hostile_text_is_drawn_as_text_everywhere(
    deck: Deck, strings: list[str], chat: str, screen: tuple[str, str]
) -> None:
    deck.alive("the start of an example")
    deck.fed.append(strings)
    pilot, app = deck.pilot, deck.pilot.app
    main = app.main  # type: ignore[attr-defined]
    rt = app.host.runtime  # type: ignore[attr-defined]
    turns, threads, tasks = [], [], []
    told_before = len(told(deck.recorder))
    for text in strings:
        n = next(N)
        threads.append(thread := f"{text}·{n}")
        for message in (
            Message(origin="invoke", sender=text, thread_id=thread,
                    text=f"{text} run `echo {shell_safe(text)}`"),
            Message(origin="chat", channel=text or "c", sender=text, thread_id=f"chat:{thread}",
                    text=text or "x"),
        ):  # fmt: skip
            turns.append((await rt.submit(message)).turn_id)
        rt.notice("warning", text)  # the runtime's notice, shown as a notification
        app.notify(text, title=text, severity="warning")  # and one with the text as it is
        tasks.append(name := f"t{n}{file_safe(text)}")
        (rt.room.path / "tasks").mkdir(exist_ok=True)
        (rt.room.path / "tasks" / f"{name}.md").write_text("hello")

    async def running() -> list[str]:
        return [t for t in turns if (await rt.outcome(t)).status in ("running", "queued")]

    await until(pilot, lambda: len(told(deck.recorder)) > told_before + len(strings),
                "the notices are told too")  # fmt: skip
    await until(pilot, lambda: app.screen.query("Toast"), "the notifications are drawn")
    await until(pilot, running, "every turn settles", ok=lambda left: not left)
    waiting = {p.call_id for p in await rt.pending()}
    await until(pilot, lambda: waiting <= set(main.state.pending), "the queue shows the calls")
    await until(pilot, lambda: {f"task:{t}" for t in tasks} <= set(main.state.recent_threads),
                "the tasks' threads are known")  # fmt: skip
    await drawn_clean(deck, "the main screen")

    # the details of one of these calls, opened from the queue
    mine = [k for k, call in main.state.pending.items() if call.thread_id in threads]
    assert mine, f"no call waits on {threads!r}"
    queue = main.query_one(DecisionQueue)
    queue.focus()
    queue.move_cursor(row=queue.get_row_index(mine[-1]), animate=False)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "the call's details")
    await drawn_clean(deck, "the call's details")
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is main, "back on the main screen")

    # a chat: the message, its sender, the answer (or the task's)
    await main.switch_thread(f"task:{tasks[-1]}" if chat == "task:" else chat + threads[-1])
    await drawn_clean(deck, f"the chat of a {chat or 'invoke:'} thread")

    key, name = screen
    queue.focus()
    await pilot.press(key)
    await until(pilot, lambda: type(app.screen).__name__ == name, f"the {name}")
    await drawn_clean(deck, name)
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is main, "back on the main screen")
