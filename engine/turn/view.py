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
    if found is None:
        out = [m for m in messages if m.compaction is None]
        cut: set[int] = set()
    else:
        index, mark = found
        covers = int(mark.get("covers", 0))
        cut = {int(seq) for seq in mark.get("shortened", ())}
        out = []
        if covers > 0:  # (a marker that only shortens old results has no summary)
            out.append(ConvMessage(role="user", text=f"{SUMMARY_NOTE}\n\n{messages[index].text}"))
        for seq in range(covers, len(messages)):
            m = messages[seq]
            if m.compaction is not None:
                continue
            if seq in cut:
                m = m.model_copy(update={"text": shortened(m.text, "of this old result left out")})
            out.append(m)
    if window is not None:  # one entry larger than half the window is read cut (a text no
        # longer than `limit` characters is fewer tokens: skip the estimate)
        limit = window // 2
        if large is not None:  # only those the conversation knows are large can be
            wanted = {id(messages[i]) for i, size in large.items() if size > limit}
            if not wanted:
                return out
        out = [m if len(m.text) <= limit or estimate_tokens(m.text) <= limit else
               m.model_copy(update={"text": cut_to_tokens(m.text, limit)}) for m in out]  # fmt: skip
    return out


def cut_to_tokens(text: str, tokens: int) -> str:
    """`text` cut to about `tokens` tokens: its start and its end, with a note between."""
    keep = max(200, tokens * 3)  # characters (an estimate's ~4 a token, less, for room)
    head, tail = keep * 2 // 3, keep // 3
    left = len(text) - head - tail
    return (f"{text[:head]}\n[… {left:,} characters left out: this entry is larger than "
            f"the model's context window allows …]\n{text[-tail:]}")  # fmt: skip
