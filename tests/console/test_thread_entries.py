"""A thread's chat entries (console/threads.py): a message seen twice is shown once, and
one an operator edited at a breakpoint (the same place again, new text) shows its new text."""

from __future__ import annotations

from console.threads import ChatEntry, ThreadView


def test_an_entry_seen_again_is_kept_once_and_takes_an_edited_text() -> None:
    view = ThreadView("t1")
    view.append(ChatEntry("user", "delete everything", "t2", seq=0))
    view.append(ChatEntry("assistant", "hm", "t2", seq=1))
    before = view.version
    view.append(ChatEntry("user", "delete everything", "t2", seq=0))  # read and streamed
    assert [e.text for e in view.entries] == ["delete everything", "hm"]
    assert view.version == before  # nothing to draw again
    view.append(ChatEntry("user", "list files", "t2", seq=0))  # edited at a breakpoint
    assert [e.text for e in view.entries] == ["list files", "hm"]
    assert view.version == before + 1
