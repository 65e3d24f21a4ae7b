"""The conversation as the model reads it: one view of a thread's append-only log.

Every request a turn sends is built here from the thread's entries, so the turn, a turn
resumed after a crash, and anything that reloads a thread send the same thing. The log
itself never changes: a compaction is an entry of it (a marker: engine/turn/compaction.py)
that says which leading entries its summary stands for and which old tool results are
read shortened; an undo is an entry too. Here the newest marker not undone is applied.
A single entry larger than half the model's window is read cut, with a note. (A user
message's circumstances, its date, channel and sender, travel with it as
`ConvMessage.context`; each provider puts them before its text: `read_text`.)
"""

from __future__ import annotations

from typing import Any

from engine.domain.messages import ConvMessage
from engine.providers.windows import estimate_tokens

SUMMARY_NOTE = ("[The conversation before this point, summarised to keep it within the "
                "model's context window; the whole of it is kept in the room's history.]")  # fmt: skip
HEAD, TAIL = 2000, 1000  # characters of a shortened entry kept at its start and its end


def marker_of(messages: list[ConvMessage]) -> tuple[int, dict[str, Any]] | None:
    """The newest compaction in effect: its index in the log and what it says."""
    undone: set[int] = set()
    for index in range(len(messages) - 1, -1, -1):
        mark = messages[index].compaction
        if mark is None:
            continue
        if mark.get("kind") == "undo":
            undone.add(int(mark.get("of", -1)))
        elif index not in undone:
            return index, mark
    return None


def shortened(text: str, note: str) -> str:
    """`text` with its middle left out, saying so (head and tail kept)."""
    if len(text) <= HEAD + TAIL + 200:
        return text
    left = len(text) - HEAD - TAIL
    return f"{text[:HEAD]}\n[… {left:,} characters {note} …]\n{text[-TAIL:]}"


_LOOK = object()  # request_messages's marker not given: it is looked for


def request_messages(messages: list[ConvMessage], window: int | None = None,
                     found: Any = _LOOK, large: Any = None) -> list[ConvMessage]:  # fmt: skip
    """The entries of a thread as one request sends them (`found`: the marker in effect,
    and `large`: the indices of its large entries, as the Conversation keeps them; else
    they are looked for)."""
    if found is _LOOK:
        found = marker_of(messages)
    head, start, cut = _head(messages, found)
    limit = _limit(window, large)
    out = [_read(m, False, limit) for m in head]
    for seq in range(start, len(messages)):
        m = messages[seq]
        if m.compaction is None:
            out.append(_read(m, seq in cut, limit))
    return out


def _head(messages: list[ConvMessage], found: tuple[int, dict[str, Any]] | None,
          ) -> tuple[list[ConvMessage], int, set[int]]:  # fmt: skip
    """What a marker makes of a request: the summary that opens it (if the marker has one),
    the first entry read after it, and the entries read shortened."""
    if found is None:
        return [], 0, set()
    index, mark = found
    covers = int(mark.get("covers", 0))
    cut = {int(seq) for seq in mark.get("shortened", ())}
    if covers > 0:  # (a marker that only shortens old results has no summary)
        return (
            [ConvMessage(role="user", text=f"{SUMMARY_NOTE}\n\n{messages[index].text}")],
            covers,
            cut,
        )
    return [], covers, cut


def _limit(window: int | None, large: Any) -> int | None:
    """The size past which an entry is read cut (half the window), or None when none is:
    no window, or (`large` given: the conversation's large entries) none of them is past it."""
    if window is None:
        return None
    limit = window // 2
    if large is not None and not any(size > limit for size in large.values()):
        return None
    return limit


def _read(m: ConvMessage, short: bool, limit: int | None) -> ConvMessage:
    """One entry as a request reads it: shortened (an old result a marker names), and cut
    when it is larger than `limit` tokens (a text no longer than `limit` characters is
    fewer tokens: the estimate is skipped)."""
    if short:
        m = m.model_copy(update={"text": shortened(m.text, "of this old result left out")})
    if limit is not None and len(m.text) > limit and estimate_tokens(m.text) > limit:
        m = m.model_copy(update={"text": cut_to_tokens(m.text, limit)})
    return m


class View:
    """`request_messages` of one append-only log, kept and extended as entries are
    appended: a request costs what is new since the previous one (and a copy of the list),
    not a pass over the whole thread. Built again when what it depends on changes: the
    marker in effect, or the size past which entries are cut."""

    def __init__(self) -> None:
        self._key: tuple[int | None, int | None] | None = None
        self._out: list[ConvMessage] = []
        self._upto = 0  # entries read so far
        self._cut: set[int] = set()
        self._limit: int | None = None

    def of(self, messages: list[ConvMessage], window: int | None,
           found: tuple[int, dict[str, Any]] | None, large: Any) -> list[ConvMessage]:  # fmt: skip
        """`request_messages(messages, window, found, large)`, as a list of its own."""
        limit = _limit(window, large)
        key = (found[0] if found is not None else None, limit)
        if key != self._key:
            head, start, self._cut = _head(messages, found)
            if start < 0:  # (not a marker the runtime writes: read whole, as it says)
                self._key = None
                return request_messages(messages, window, found, large)
            self._key, self._limit, self._upto = key, limit, start
            self._out = [_read(m, False, limit) for m in head]
        out, cut = self._out, self._cut
        for seq in range(self._upto, len(messages)):
            m = messages[seq]
            if m.compaction is None:
                out.append(_read(m, seq in cut, self._limit))
        self._upto = max(self._upto, len(messages))
        return list(out)


def cut_to_tokens(text: str, tokens: int) -> str:
    """`text` cut to about `tokens` tokens: its start and its end, with a note between."""
    keep = max(200, tokens * 3)  # characters (an estimate's ~4 a token, less, for room)
    head, tail = keep * 2 // 3, keep // 3
    left = len(text) - head - tail
    return (f"{text[:head]}\n[… {left:,} characters left out: this entry is larger than "
            f"the model's context window allows …]\n{text[-tail:]}")  # fmt: skip
