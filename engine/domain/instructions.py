"""What a turn's agent is told: its instructions, assembled from four places, most general
first, each later one more specific and taking precedence where they disagree:

1. the room's `AGENTS.md` (as Codex, opencode and others read a project's),
2. `[agent] instructions` in agentdeck.toml,
3. the thread's group's: `[groups.NAME] instructions`,
4. the thread's own: set by an operator (console, CLI, API), else `[threads."ID"] instructions`.

They are sent as the system prompt, which stays the same from turn to turn so a
provider's prompt cache holds; what changes each turn (the date, the channel, the sender)
goes with the user's message instead (`message_context`). Each turn records the hash of
its text (the text itself is stored once per distinct text), so history shows what the
agent was told and when it changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

MAX_PART = 262_144  # characters of one part (a longer file is cut, with a note)
HEADER = ("Your instructions follow, from the most general to the most specific; where "
          "they disagree, the later ones win.")  # fmt: skip


@dataclass(frozen=True)
class Instructions:
    """The parts, as (source, text), in order; `text` is what the model is sent."""

    parts: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        if not self.parts:
            return ""
        if len(self.parts) == 1:
            return self.parts[0][1]
        body = "\n\n".join(f"## From {source}\n\n{text}" for source, text in self.parts)
        return f"{HEADER}\n\n{body}"

    @property
    def hash(self) -> str:
        """What a turn records: the same parts always give the same hash."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16] if self.parts else ""

    def parts_json(self) -> str:
        return json.dumps([list(p) for p in self.parts], ensure_ascii=False)

    @classmethod
    def from_stored(cls, parts_json: str) -> Instructions:
        try:
            parts = json.loads(parts_json)
            return cls(tuple((str(source), str(text)) for source, text in parts))
        except (ValueError, TypeError):  # a row another version wrote: what it says is lost
            return cls()


def assemble(file_text: str | None, room: str | None, group: tuple[str, str | None],
             thread: tuple[str, str | None]) -> Instructions:  # fmt: skip
    """The instructions of a turn: the room's file, `[agent]`'s, the group's (its name and
    text) and the thread's (its id and text); empty ones are left out."""
    parts = []
    for source, text in (("AGENTS.md", file_text), ("[agent] instructions", room),
                         (f"the group {group[0]}", group[1]),
                         (f"the thread {thread[0]}", thread[1])):  # fmt: skip
        if text and text.strip():
            text = text.strip()
            if len(text) > MAX_PART:
                text = text[:MAX_PART] + f"\n[… cut: the rest of {len(text):,} characters]"
            parts.append((source, text))
    return Instructions(tuple(parts))


def message_context(at: float, channel: str | None, sender: str) -> str:
    """What changes from turn to turn, said with the user's message (not in the system
    prompt, so a provider's prompt cache holds): the local date and time, and where the
    message came from."""
    when = datetime.fromtimestamp(at).astimezone().strftime("%A %Y-%m-%d %H:%M %Z")
    where = f" · via {channel}" if channel and channel != "console" else ""
    who = f" · from {sender}" if sender else ""
    return f"{when}{where}{who}"
