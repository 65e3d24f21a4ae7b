"""A context that never overflows: before an inference, the request's size is measured and,
past `THRESHOLD` of the model's window, the conversation is compacted.

Each model has a context window (`ContextWindow.tokens`: `[model] context_window`, else the
provider's documented window for its model name, engine/providers/windows.py). The size of
a request is estimated (no tokenizer ships in a package the runtime may use offline) and
corrected from the input tokens the provider reports for the requests sent
(`ContextWindow.learn`).

Compacting, in order, until the request fits:
1. old tool results larger than `SHORT_RESULT` tokens are read shortened (head and tail, a
   note the model reads), all but those of the newest exchange;
2. the model summarises the oldest part of the conversation, up to a user message, keeping
   the newest `KEEP` of the window as it is.

Both are one marker appended to the log (a `system` entry whose text is the summary, with
what it covers, what it shortens, and the sizes before and after) in a checkpoint of its
own, as a step `compaction`: the log stays append-only, and engine/turn/view.py reads it.
A crash before the checkpoint leaves nothing (the next inference compacts again); after
it, the marker is read back, never made again. An operator may compact a thread now or
undo the last compaction (`compact` and `uncompact` turns: engine/strategies/compact.py).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from engine.domain.messages import ConvMessage
from engine.domain.usage import Usage
from engine.providers.base import AssistantAccumulator, ModelRequest, Provider
from engine.providers.windows import estimate_tokens
from engine.store import Op
from engine.turn.context import TurnContext
from engine.turn.conversation import Conversation
from engine.turn.state import TurnState
from engine.turn.view import cut_to_tokens, marker_of, request_messages
from engine.turn.window import ContextWindow, message_tokens

KEEP = 0.4  # of the window: the newest part a summary leaves as it is
SHORT_RESULT = 500  # tokens: an older tool result larger than this may be read shortened


class Site(Protocol):
    """What compacting needs of the turn's loop (engine/turn/loop.py)."""

    ctx: TurnContext
    provider: Provider
    window: ContextWindow
    conv: Conversation
    turn: TurnState
    ops: list[Op]

    def step_schemas(self) -> list[dict[str, Any]]: ...
    def system(self, more: str | None = None) -> str | None: ...
    def append(self, msg: ConvMessage) -> None: ...
    async def commit(self, checkpoint: str | None, touched: Any = ...) -> None: ...
    def step_start(self, kind: str) -> int: ...
    def step_end(self, status: str, summary: str) -> None: ...

    async def count(self, acc: AssistantAccumulator) -> Usage: ...


SUMMARY_SYSTEM = (
    "You are compacting a long conversation between a user and an AI agent so that the "
    "agent can go on within its context window. Write a concise summary of the "
    "transcript you are given: the user's goals and requests, what was decided, what the "
    "agent did (tools called and what they found), facts and names it will need, and "
    "what was still open at the end. Write it for the agent itself, in plain prose."
)


async def fit(loop: Site, *, force: bool = False) -> bool:
    """Compact the thread when its next request would pass the threshold (`force`: now,
    as far as it goes); True when a marker was made."""
    window = loop.window
    if window.tokens is None and not force:
        return False
    messages = loop.conv.messages
    tools = loop.step_schemas()
    before = loop.conv.request_tokens(window, loop.system(), tools)
    if not force and not window.over(before):
        return False
    limit = int((window.tokens or before) * window.threshold)
    found = marker_of(messages)
    mark: dict[str, Any] = dict(found[1]) if found is not None else {"covers": 0}
    mark["shortened"] = sorted({*mark.get("shortened", ()), *_long_results(messages, mark)})
    trial = _with(messages, mark, "")
    size = window.estimate(request_messages(trial, window.tokens), loop.system(), tools)
    summary = messages[found[0]].text if found is not None else ""
    if force or size > limit:  # shortening was not enough: summarise the oldest part
        # forced (an operator's "now", or the provider's refusal): all but the newest exchange
        keep = 1 if force else max(1, int((window.tokens or before) * KEEP))
        keep_from = _keep_from(messages, window, keep)
        if keep_from > int(mark.get("covers", 0)):
            older = request_messages(messages[:keep_from] if found is None else
                                     _with(messages[:keep_from], mark, summary))  # fmt: skip
            summary = await _summarise(loop, older)
            mark["covers"] = keep_from
    old = found[1] if found is not None else {"covers": 0, "shortened": []}
    if (mark.get("covers", 0), mark["shortened"]) == (
        old.get("covers", 0),
        old.get("shortened", []),
    ):
        return False  # nothing more to compact (the newest exchange is kept whole)
    after = window.estimate(request_messages(_with(messages, mark, summary), window.tokens),
                            loop.system(), tools)  # fmt: skip
    mark.update(kind="compaction", before=before, after=after, window=window.tokens)
    loop.append(ConvMessage(role="system", text=summary or "(old tool results shortened)",
                            compaction=mark))  # fmt: skip
    await loop.commit("compacted")
    return True


def _with(messages: list[ConvMessage], mark: dict[str, Any], summary: str) -> list[ConvMessage]:
    """`messages` with `mark` appended as the newest marker (to measure before writing)."""
    return [*messages, ConvMessage(role="system", text=summary, compaction=dict(mark))]


def _long_results(messages: list[ConvMessage], mark: dict[str, Any]) -> list[int]:
    """Tool results past SHORT_RESULT tokens, older than the newest user message, not
    already covered by a summary."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    start = int(mark.get("covers", 0))
    return [i for i in range(start, last_user) if messages[i].role == "tool"
            and estimate_tokens(messages[i].text) > SHORT_RESULT]  # fmt: skip


def _keep_from(messages: list[ConvMessage], window: ContextWindow, keep: int) -> int:
    """Where the part left as it is starts: the newest entries worth `keep` tokens, back
    to a user message (so no tool result is kept without the call that asked for it), and
    never past the newest user message."""
    total, start = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += message_tokens(messages[i])
        if total > keep:
            break
        start = i
    users = [i for i, m in enumerate(messages) if m.role == "user" and m.compaction is None]
    if not users:
        return 0
    later = [i for i in users if i >= start]
    return later[0] if later else users[-1]


async def _summarise(loop: Site, older: list[ConvMessage]) -> str:
    """The model's summary of `older`, as one step of the turn."""
    window = loop.window
    text = transcript(older)
    if window.tokens is not None:  # the summary's own request must fit too
        budget = int(window.tokens * 0.6)
        if estimate_tokens(text) > budget:
            text = cut_to_tokens(text, budget)
    request = ModelRequest(messages=[ConvMessage(role="user", text=text)], system=SUMMARY_SYSTEM,
                           purpose="summary")  # fmt: skip
    loop.step_start("compaction")
    acc = AssistantAccumulator()
    async for event in loop.provider.stream(request):
        acc.add(event)
    await loop.count(acc)
    summary = "".join(acc.text).strip() or "(the model gave no summary)"
    loop.step_end("succeeded", f"summarised {len(older)} messages")
    return summary


def transcript(messages: list[ConvMessage]) -> str:
    """The messages as a transcript the summariser reads (a long tool result cut)."""
    lines = []
    for m in messages:
        if m.role == "tool":
            body = m.text if len(m.text) <= 1500 else m.text[:1000] + " […] " + m.text[-300:]
            lines.append(f"[tool {m.tool_name or ''} result]\n{body}")
            continue
        calls = "".join(
            f"\n[calls {c.name}({json.dumps(c.arguments)[:500]})]" for c in m.tool_calls
        )
        lines.append(f"[{m.role}]\n{m.read_text}{calls}")
    return "\n\n".join(lines)


async def undo(loop: Site) -> bool:
    """Undo the newest compaction in effect (an entry of its own); False: none."""
    found = marker_of(loop.conv.messages)
    if found is None:
        return False
    loop.append(ConvMessage(role="system", text="(the last compaction undone)",
                            compaction={"kind": "undo", "of": found[0]}))  # fmt: skip
    await loop.commit("compaction_undone")
    return True
