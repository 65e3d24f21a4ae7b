"""The review after a crash: each call whose outcome a dead runtime left unknown, with what
is known of it, and the operator's answers (engine/decisions/review.py).

A call that was running when agentdeck stopped may have run, in part or whole, or not at
all; it waits for a review, not an approval. The screen lists each such call (tool,
whole arguments, when it started, its process group and whether it still runs, the files
it was writing) and answers it: `s` marks it succeeded with a result the operator types,
`f` marks it failed with a reason, `r` runs it again after a confirmation that names the
risk (it may then have run twice), `k` ends its surviving process group. The turn resumes
from the decision. Everything goes through the bridge to the room's client, so the screen
works the same hosted or attached to another owner; the list is read again after each
action and every REFRESH seconds while shown (a process group may end by itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input

from console.bridge import Bridge
from console.format import clock_time, facts, one_line, plain, pretty, set_title, short_id
from console.screens.confirm import ConfirmScreen
from console.screens.prompt import PromptScreen
from console.state import CallRow
from console.widgets.key_bar import KeyBar
from console.widgets.keyed_table import KeyedTable
from console.widgets.text import Static

if TYPE_CHECKING:
    from engine.domain.review import Review

REFRESH = 2.0  # seconds between reads of the reviews while the screen is shown
COLUMNS = ("tool", "state", "arguments", "thread", "started", "process")


class ReviewScreen(Screen[None]):
    """Opened by `!` (or the palette's "Review"); Esc or q closes it."""

    # Priority: `k` is the table's cursor-up key; here it kills (arrows move the cursor).
    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("s", "answer('succeeded')", "Mark succeeded", priority=True),
        Binding("f", "answer('failed')", "Mark failed", priority=True),
        Binding("r", "answer('rerun')", "Run again", priority=True),
        Binding("k", "kill", "Kill process group", priority=True),
    ]

    class Acted(Message):
        """An answer reached the runtime: `action` on `call_id`, and what it said."""

        def __init__(self, action: str, call_id: str, result: Any) -> None:
            super().__init__()
            self.action, self.call_id, self.result = action, call_id, result

    def __init__(self, bridge: Bridge) -> None:
        super().__init__()
        self.bridge = bridge
        self.reviews: dict[str, Review] = {}
        self.loaded = 0  # how many times the list was read (tests look)
        self._busy = asyncio.Lock()  # one answer at a time

    def compose(self) -> ComposeResult:
        yield Static(id="review-summary")
        with Vertical(id="review-list-pane", classes="pane"):
            yield KeyedTable(COLUMNS, state_columns=("state",), give_way=("arguments",),
                             id="review-calls")  # fmt: skip
        with Vertical(id="review-detail-pane", classes="pane"):
            with VerticalScroll():
                yield Static(id="review-detail")
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#review-list-pane"), "Calls under review")
        set_title(self.query_one("#review-detail-pane"), "What is known")
        self.reload()
        self.set_interval(REFRESH, self.reload, name="reviews")
        self.query_one("#review-calls").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        """(title, help, callback) for the palette while this screen is shown."""
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.description and b.action != "close":
                yield (f"Review: {b.description}", f"key {b.key} (the selected call)",
                       partial(self.run_action, b.action))  # fmt: skip
        yield "Close review", "Back to the main screen (q)", self.action_close

    # -- drawing ----------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the reviews again (in a worker: an attached console asks the owner)."""
        self.run_worker(self._reload, group="reviews", exclusive=True)  # type: ignore[arg-type]

    async def _reload(self) -> None:
        try:
            reviews = await self.bridge.api.reviews()
        except Exception as exc:  # an owner that went away: said on the screen, not raised
            self.query_one("#review-summary", Static).update(f" review: {exc}")
            return
        self.reviews = {r.call_id: r for r in reviews}
        self.loaded += 1
        decided = self.bridge.state.decided
        self.query_one("#review-calls", KeyedTable).show({
            r.call_id: (r.tool, "decided" if r.call_id in decided else "review",
                        one_line(r.args, 120), r.thread_id, clock_time(r.started_at),
                        _process_cell(r))
            for r in reviews
        })  # fmt: skip
        self.query_one("#review-summary", Static).update(_summary(len(reviews)))
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def _show_detail(self) -> None:
        review = self.current()
        detail = self.query_one("#review-detail", Static)
        detail.update(_detail(review) if review is not None else "No call waits for a review.")

    def current(self) -> Review | None:
        """The call under the cursor."""
        key = self.query_one("#review-calls", KeyedTable).current_key()
        return self.reviews.get(key) if key is not None else None

    # -- answers ----------------------------------------------------------------------------

    def action_answer(self, action: str) -> None:
        self.run_worker(self._answer(action), group="answer")

    def action_kill(self) -> None:
        self.run_worker(self._kill(), group="answer")

    async def _answer(self, action: str) -> None:
        async with self._busy:
            review = self._chosen()
            if review is None:
                return
            decision = await self._ask(action, review)
            if decision is None:
                return
            try:
                decided = await self.bridge.api.decide(decision)
            except Exception as exc:  # shown to the operator, never a crash
                self.notify(f"Nothing decided: {exc}", severity="error")
                return
            if decided.status == "refused":
                self.notify(f"Nothing decided: {decided.note}", severity="warning")
            elif decided.status == "duplicate":
                self.notify(f"{review.call_id} was already decided.", severity="warning")
            else:
                self.bridge.state.mark_decided(review.call_id, decision.action)
                self.notify(f"{review.tool} call {review.call_id}: {_DONE[action]}; its turn "
                            "resumes from this decision.", title="Reviewed")  # fmt: skip
            self.post_message(self.Acted(action, review.call_id, decided.status))
            await self._reload()

    def _chosen(self) -> Review | None:
        """The call under the cursor, if it takes an answer now (else say why not)."""
        review = self.current()
        if review is None:
            self.notify("No call is selected.", severity="warning")
        elif review.call_id in self.bridge.state.decided:
            self.notify(f"{review.call_id} is decided: it applies when its turn is free.",
                        severity="warning")  # fmt: skip
            return None
        return review

    async def _ask(self, action: str, review: Review) -> Any:
        """The decision the operator's answer makes, or None when they back out."""
        from engine.domain.decisions import Decision

        what = f"{review.tool} {one_line(review.args, 60)}"
        make_id = self.bridge.decision_id
        if action == "succeeded":
            result = await self.app.push_screen_wait(PromptScreen(
                f"Mark {what} succeeded: the model reads what you type as the tool's output. "
                "Result:", "result"))  # fmt: skip
            return Decision.with_result(review.call_id, result, id=make_id()) if result else None
        if action == "failed":
            reason = await self.app.push_screen_wait(PromptScreen(
                f"Mark {what} failed: the model reads that its outcome is unknown and you "
                "marked it failed. Reason (optional):", "reason"))  # fmt: skip
            return None if reason is None else Decision.fail(review.call_id, reason, id=make_id())
        ok = await self.app.push_screen_wait(ConfirmScreen(
            f"Run {what} again? It was running when agentdeck stopped and may have run "
            "already, in part or whole: running it again may do it twice.",
            body=Text(pretty(review.args)), yes="Run it again", no="Keep waiting"))  # fmt: skip
        return Decision.rerun(review.call_id, seen=review.args, id=make_id()) if ok else None

    async def _kill(self) -> None:
        async with self._busy:
            review = self.current()
            process = review.process if review is not None else None
            if review is None or process is None or not process.alive:
                what = "No call is selected." if review is None else (
                    f"{review.call_id} recorded no process group." if process is None
                    else f"Process group {process.pgid} of {review.call_id} is not running.")  # fmt: skip
                self.notify(what, severity="warning")
                return
            if not await self.app.push_screen_wait(ConfirmScreen(
                f"Kill process group {process.pgid} (`{one_line(process.command, 60)}`) of "
                f"{review.tool} call {review.call_id}? SIGTERM, then SIGKILL.",
                yes="Kill it", no="Leave it")):  # fmt: skip
                return
            try:
                killed = await self.bridge.api.kill_orphan(review.call_id)
            except Exception as exc:  # shown to the operator, never a crash
                self.notify(f"Nothing killed: {exc}", severity="error")
                return
            self.notify(f"Process group {killed.pgid} of {review.call_id}: {killed.result}.",
                        title="Kill",
                        severity="warning" if killed.result == "survived" else "information")  # fmt: skip
            self.post_message(self.Acted("kill", review.call_id, killed.result))
            await self._reload()


def tell_reviews(screen: Screen[Any], pending: dict[str, CallRow], told: set[str]) -> int:
    """Tell the operator, in one notification, of the calls in `pending` waiting for a
    review that are not in `told` (then added to it); return how many were new."""
    waiting = [k for k, c in pending.items() if c.under_review]
    fresh = [k for k in waiting if k not in told]
    if fresh:
        told.update(fresh)
        where = "Esc, then !" if isinstance(screen.focused, Input) else "press !"
        calls = "1 call was" if len(waiting) == 1 else f"{len(waiting)} calls were"
        screen.notify(f"{calls} running when agentdeck stopped: the outcome is unknown. "
                      f"Review ({where}): mark succeeded or failed, or run again.",
                      title="Review after a crash", severity="warning", timeout=30)  # fmt: skip
    return len(fresh)


_DONE = {"succeeded": "marked succeeded", "failed": "marked failed", "rerun": "runs again"}


def _summary(count: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if not count:
        return text.append(" No call waits for a review.")
    calls = "1 call was" if count == 1 else f"{count} calls were"
    whose = "its" if count == 1 else "their"
    return text.append(f" {calls} running when agentdeck stopped: {whose} outcome is "
                       "unknown. s succeeded (with a result) · f failed · r run again · "
                       "k kill a surviving process group")  # fmt: skip


def _process_cell(review: Review) -> str:
    process = review.process
    if process is None:
        return "—"
    if process.killed and not process.alive:
        return f"{process.pgid} killed"
    return f"{process.pgid} {'alive' if process.alive else 'gone'}"


def _detail(review: Review) -> Group:
    from engine.domain.review import file_text, process_text

    known = facts((
        ("call", review.call_id), ("tool", review.tool), ("thread", review.thread_id),
        ("turn", short_id(review.turn_id)),
        ("started", f"{clock_time(review.started_at)}: it was running when agentdeck stopped"),
        ("review since", clock_time(review.since)),
        ("process", process_text(review.process) if review.process else "none recorded"),
        *(("file", file_text(f)) for f in review.files),
    ))  # fmt: skip
    return Group(known, Text("\narguments", style="bold"), plain(pretty(review.args), lines=True))
