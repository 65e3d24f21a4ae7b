"""Pilot tests of the operator's paths, asserting on recorded messages and view state."""

from __future__ import annotations

import pytest
from textual import events
from textual.notifications import Notify
from textual.widgets import Input, TextArea
from textual.widgets.input import Selection

from console.bridge import Bridge
from console.screens.compose import ComposeScreen
from console.screens.confirm import ConfirmScreen
from console.screens.edit_args import EditArgsScreen
from console.screens.main import MainScreen
from console.screens.prompt import PromptScreen
from console.widgets.chat_log import ChatLog
from console.widgets.decision_queue import DecisionQueue
from console.widgets.timeline import Timeline
from engine.providers.base import ProviderError
from tests.console.helpers import (
    SIZE,
    Recorder,
    call_waits,
    send,
    started,
    until,
    until_pending,
)

pytestmark = pytest.mark.anyio


async def test_chat_message_streams_answer(deck_app) -> None:
    rec = Recorder(Bridge.Changed, MainScreen.Acted)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 2+2")
        await until(pilot, lambda: main.state.counts() == (0, 0) and main.state.turns, "turn done")
        sent = rec.of(MainScreen.Acted)[0]
        assert (sent.action, sent.target) == ("send", "chat:main")
        view = main.state.thread("chat:main")
        assert [e.role for e in view.entries] == ["user", "assistant", "tool", "assistant"]
        assert view.entries[-1].text == "`calc` returned: 4"
        # The answer arrived as text deltas, folded per frame into Changed messages.
        assert any("chat:main" in m.changes.threads for m in rec.of(Bridge.Changed))
        assert main.selected_turn == sent.result
        await app.shutdown()


async def test_approve_shell_by_keyboard(deck_app) -> None:
    rec = Recorder(MainScreen.Acted, DecisionQueue.Decide)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        await pilot.press("escape", "d")  # Esc leaves the chat input, d goes to the queue
        queue = main.query_one(DecisionQueue)
        assert queue.has_focus
        await pilot.press("enter")  # Enter only opens the details
        await until(pilot, lambda: app.screen.__class__.__name__ == "CallDetailScreen", "details")
        await pilot.press("escape")
        assert main.state.pending, "Enter must not decide"
        await pilot.press("a")
        await until(pilot, lambda: not main.state.pending and main.state.counts() == (0, 0),
                    "turn finished")  # fmt: skip
        assert [m.action for m in rec.of(DecisionQueue.Decide)] == ["details", "approve"]
        await pilot.pause()
        assert queue.row_count == 0  # the decided call left the queue
        answer = main.state.thread("chat:main").entries[-1].text
        assert answer == "`shell` exited 0: hi"  # said, not quoted: the chat shows the output
        turn = next(iter(main.state.turns.values()))
        assert (turn.status, turn.reason) == ("done", "natural")
        await app.shutdown()


async def test_cancel_with_reason_is_quoted(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `rm -rf build`")
        main.query_one(DecisionQueue).focus()
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "reason prompt")
        reason = app.screen.query_one("Input", Input)
        reason.value = "not on"
        reason.cursor_position = len(reason.value)
        reason.post_message(events.Paste(" a\r\nFriday\n"))  # pasted: kept, on one line
        await until(pilot, lambda: reason.value == "not on a Friday", "the pasted reason")
        await pilot.press("enter")
        await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                    "turn finished")  # fmt: skip
        answer = main.state.thread("chat:main").entries[-1].text
        assert answer.startswith("`shell` failed:")
        assert answer.endswith("denied by operator: not on a Friday")
        await app.shutdown()


async def test_escape_on_reason_prompt_decides_nothing(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        main.query_one(DecisionQueue).focus()
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "reason prompt")
        await pilot.press("escape")
        await pilot.pause()
        assert list(main.state.pending) and main.state.counts() == (0, 1)
        await app.shutdown()


async def test_edit_arguments_then_approve(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        main.query_one(DecisionQueue).focus()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "editor")
        editor = app.screen.query_one("TextArea")
        editor.text = '{"command": "echo edited"}'
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "diff review")
        diff = str(app.screen.body)
        assert '-  "command": "echo hi"' in diff and '+  "command": "echo edited"' in diff
        await pilot.press("enter")  # focus starts on No: Enter is the harmless answer
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "back in editor")
        assert main.state.pending
        await pilot.press("escape")  # edited: asked before the edit is dropped, No the default
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "discard?")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "still editing")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "diff review again")
        await pilot.press("y")
        await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                    "turn finished")  # fmt: skip
        assert "edited" in main.state.thread("chat:main").entries[-1].text
        call = next(iter(main.state.calls.values()))
        assert call.args == {"command": "echo edited"}
        await app.shutdown()


async def test_switch_and_new_thread(deck_app) -> None:
    rec = Recorder(MainScreen.Acted)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 1+1")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "turn 1")
        await pilot.press("ctrl+n")
        await until(pilot, lambda: main.thread_id == "chat:2", "new thread")
        await send(pilot, "calc 3*3")
        await until(pilot, lambda: len(main.state.turns) == 2 and main.state.counts() == (0, 0),
                    "turn 2")  # fmt: skip
        assert main.state.thread("chat:2").entries[-1].text == "`calc` returned: 9"
        await pilot.press("ctrl+t")
        await until(pilot, lambda: app.screen.__class__.__name__ == "ThreadPickerScreen", "picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: main.thread_id == "chat:main", "switched back")
        actions = [(m.action, m.target) for m in rec.of(MainScreen.Acted)]
        assert ("new_thread", "chat:2") in actions and ("switch_thread", "chat:main") in actions
        await app.shutdown()


async def test_an_untouched_argument_editor_closes_at_once(deck_app) -> None:
    """Arguments with characters an editor takes for line breaks are shown escaped, so the
    editor holds them as they are: Esc asks nothing, ctrl+s finds valid JSON."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo a\u2028b`")
        main.query_one(DecisionQueue).focus()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "editor")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "diff review")
        assert "(no change)" in str(app.screen.body)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "back in editor")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "closed, nothing asked")
        assert main.state.pending
        await app.shutdown()


async def test_up_and_down_bring_back_earlier_messages(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        for n, text in enumerate(("calc 1+1", "calc 2*3"), start=1):
            await send(pilot, text)
            await until(pilot, lambda n=n: len(main.state.turns) == n
                        and main.state.counts() == (0, 0), f"turn {n}")  # fmt: skip
        field = main.query_one("#chat-input", Input)
        field.value = "calc 9"  # a draft, kept while the history is walked
        await pilot.press("up")
        assert field.value == "calc 2*3" and field.cursor_position == len("calc 2*3")
        await pilot.press("up", "up")  # the oldest stays
        assert field.value == "calc 1+1"
        await pilot.press("down")
        assert field.value == "calc 2*3"
        await pilot.press("down")
        assert field.value == "calc 9"
        await pilot.press("up", "enter")  # sent again, as it reads; the draft comes back
        await until(pilot, lambda: len(main.state.turns) == 3, "turn 3")
        assert field.value == "calc 9"
        await pilot.press("up")
        assert field.value == "calc 2*3"
        await pilot.press("ctrl+n")  # another thread: its own (empty) draft
        await until(pilot, lambda: main.thread_id == "chat:2", "new thread")
        assert field.value == ""
        field.value = "for chat:2"
        await main.switch_thread("chat:main")  # back: this thread's draft, not the message
        assert field.value == "calc 9"
        await main.switch_thread("chat:2")
        assert field.value == "for chat:2"
        await app.shutdown()


async def test_a_paste_of_several_lines_opens_the_editor_and_loses_none(deck_app) -> None:
    """Input keeps only a paste's first line; the chat opens an editor with all of it."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        field = main.query_one("#chat-input", Input)
        await pilot.click("#chat-input")
        field.value = "calc "
        field.cursor_position = len(field.value)
        field.post_message(events.Paste("\n2+2\n"))  # one line: typed in, as Input does
        await until(pilot, lambda: field.value == "calc 2+2", "one line pasted")
        field.post_message(events.Paste("\nplease\x0band thanks\n"))  # \v: Word's soft break
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "the editor")
        editor = app.screen.query_one(TextArea)
        assert editor.text == "calc 2+2\nplease\nand thanks\n"
        await pilot.press("escape")  # unchanged: back at once, nothing sent
        await until(pilot, lambda: app.screen is main, "back")
        assert field.value == "calc 2+2" and not main.state.turns
        field.post_message(events.Paste("a\nb"))
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "the editor again")
        app.screen.query_one(TextArea).insert("edited ")
        await pilot.press("escape")  # edited: asked first, and No (keep writing) is the default
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "still writing")
        await pilot.press("escape", "y")
        await until(pilot, lambda: app.screen is main, "discarded")
        field.selection = Selection(0, len(field.value))  # a selection is replaced
        field.post_message(events.Paste("first line\rsecond line"))  # as terminals paste
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "the editor, third")
        assert app.screen.query_one(TextArea).text == "first line\nsecond line"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "sent")
        sent = [e.text for e in main.state.thread("chat:main").entries if e.role == "user"]
        assert sent == ["first line\nsecond line"] and field.value == ""
        await app.shutdown()


async def test_a_message_of_several_lines_brought_back_keeps_the_draft(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        field = main.query_one("#chat-input", Input)
        await pilot.click("#chat-input")
        field.post_message(events.Paste("calc 1+1\nthanks"))
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "the editor")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "turn 1")
        field.value = "draft"
        await pilot.press("up")  # several lines: shown in the editor, the input left alone
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "brought back")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "back")
        field.value += " more"  # typed after: still the draft
        await pilot.press("down")
        assert field.value == "draft more"
        await pilot.press("up")
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), "brought back again")
        await pilot.press("ctrl+s")  # sent again: the draft is still there to go on with
        await until(pilot, lambda: len(main.state.turns) == 2, "turn 2")
        assert field.value == "draft more"
        await app.shutdown()


async def test_the_chat_follows_new_messages_after_a_resize(deck_app) -> None:
    """A resize moves the bottom of the chat; it does not count as scrolling up."""
    app = deck_app()
    async with app.run_test(size=(140, 40)) as pilot:
        main = await started(pilot)
        log = main.query_one(ChatLog)
        for n in range(1, 8):
            await send(pilot, f"calc {n}*11")
            await until(pilot, lambda n=n: len(main.state.turns) == n
                        and main.state.counts() == (0, 0), f"turn {n}")  # fmt: skip
        assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: log.scroll_y == log.max_scroll_y > 0, "at the end, resized")
        await send(pilot, "calc 1+2")
        await until(pilot, lambda: len(main.state.turns) == 8 and main.state.counts() == (0, 0),
                    "turn 8")  # fmt: skip
        await until(pilot, lambda: log.scroll_y == log.max_scroll_y, "the new answer in view")
        log.scroll_to(y=0, animate=False)  # the operator scrolls up: new lines leave it there
        await pilot.pause()
        await send(pilot, "calc 2+2")
        await until(pilot, lambda: len(main.state.turns) == 9 and main.state.counts() == (0, 0),
                    "turn 9")  # fmt: skip
        assert log.scroll_y == 0
        await app.shutdown()


async def test_filter_timeline(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 1+1")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "turn 1")
        await send(pilot, "run `echo hi`")
        await until_pending(pilot, main)
        timeline = main.query_one(Timeline)
        timeline.focus()
        total = len(timeline.rows)
        await pilot.press("slash", *"tool_")
        await until(pilot, lambda: timeline.filter_text == "tool_", "filter applied")
        assert 0 < len(timeline.rows) < total
        assert all(r.kind == "tool_round" for r in timeline.rows)
        await pilot.press(*"zzz")
        await until(pilot, lambda: not timeline.rows, "nothing matches")
        assert "no step matches the filter" in timeline.render_line(0).text
        await pilot.press("escape")
        await until(pilot, lambda: timeline.filter_text == "", "filter cleared")
        assert len(timeline.rows) == total and timeline.has_focus
        await app.shutdown()


async def test_empty_panes_say_how_to_start(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await pilot.pause()
        chat = main.query_one(ChatLog)
        hint = " ".join(chat.render_line(y).text.strip() for y in range(8))
        assert "Enter sends" in hint and "offline model" in hint
        assert main.query_one(Timeline).render_line(0).text.startswith("no steps yet")
        await send(pilot, "calc 1+1")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "turn")
        await pilot.pause()
        shown = " ".join(chat.render_line(y).text for y in range(8))
        assert "you › calc 1+1" in shown and "offline model" not in shown
        await app.shutdown()


async def test_decision_queue_wraps_the_arguments_to_keep_its_columns_on_screen(deck_app) -> None:
    app = deck_app()
    # 140 wide: narrower, the queue is compact (two lines a row; test_decision_queue.py)
    async with app.run_test(size=(140, 36)) as pilot:
        main = await call_waits(
            pilot, 'write "a long enough text to be cut somewhere" to notes/long-name.txt'
        )
        queue = main.query_one(DecisionQueue)
        await pilot.pause()

        def rows() -> list[str]:
            return [queue.render_line(y).text for y in (1, 2, 3)]

        assert rows()[0].rstrip().endswith("s")  # the age column is on screen
        assert "long-name.txt" in " ".join(rows())  # the arguments whole, over the row's lines
        await pilot.resize_terminal(260, 36)
        await until(pilot, lambda: "long-name.txt" in rows()[0], "on one line")
        await pilot.resize_terminal(140, 36)
        await until(pilot, lambda: "long-name.txt" not in rows()[0], "wrapped again")
        assert rows()[0].rstrip().endswith("s")
        await app.shutdown()


class Unreachable:
    """A provider whose every request fails as a real one does when it is misconfigured."""

    name, model = "openai", "gpt-test"

    async def stream(self, request):  # noqa: ANN001, ANN201 - the Provider protocol
        raise ProviderError("openai (gpt-test): no API key is set (set OPENAI_API_KEY)")
        yield  # an async generator, as providers are


async def test_a_failed_turn_says_why_in_the_chat_live_and_after_a_restart(deck_app) -> None:
    note = "turn failed: openai (gpt-test): no API key is set (set OPENAI_API_KEY)"

    async def chat_of(app, send_first: bool) -> list[tuple[str, str]]:  # noqa: ANN001
        async with app.run_test(size=SIZE) as pilot:
            main = await started(pilot)
            if send_first:
                await send(pilot, "hello")
            view = main.state.thread("chat:main")
            await until(pilot, lambda: any(e.role == "system" for e in view.entries), "note")
            assert "✖ failed" in main.query_one(Timeline).render_line(0).text
            await app.shutdown()
            return [(e.role, e.text) for e in view.entries]

    assert await chat_of(deck_app(provider=Unreachable()), True) == [
        ("user", "hello"), ("system", note)]  # fmt: skip
    again = deck_app(provider=Unreachable(), ids=lambda prefix: f"{prefix}_again")
    assert await chat_of(again, False) == [("user", "hello"), ("system", note)]


async def test_a_message_to_a_waiting_thread_says_it_is_queued_and_why(deck_app) -> None:
    said = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=said) as pilot:
        await call_waits(pilot, "run `echo hi`")
        await send(pilot, "and then?")
        queued = lambda: [m.notification for m in said.of(Notify)  # noqa: E731
                          if m.notification.title == "Message queued"]  # fmt: skip
        await until(pilot, queued, "the queued notice")
        assert queued()[0].message.startswith(
            "Queued on chat:main: thread waiting on a decision (turn t_001)"
        )
        await app.shutdown()
