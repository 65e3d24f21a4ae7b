"""direct: one inference, no tools. The model answers from the conversation alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lifecycle import turn as turn_lifecycle

if TYPE_CHECKING:
    from engine.turn.loop import TurnLoop


async def run(loop: TurnLoop) -> None:
    await loop.resume_tool_calls()
    if not loop.conv.awaits_answer:
        return await loop.finish(turn_lifecycle.NATURAL)
    if not await loop.before_inference():
        return await loop.finish_stopped()
    inf = await loop.infer(tools=False)
    assistant = inf.acc.message().model_copy(update={"tool_calls": []})
    await loop.commit_assistant(inf, assistant)
    await loop.answered(assistant)
