"""react: the canonical loop. Inference; if the model calls tools, a tool round; again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lifecycle import turn as turn_lifecycle

if TYPE_CHECKING:
    from engine.turn.loop import TurnLoop


async def run(loop: TurnLoop) -> None:
    while True:
        await loop.resume_tool_calls()  # RESUME_TOOL_CALL at the loop top
        if not loop.conv.awaits_answer:  # nothing new for the model
            if loop.turn.suspended():
                return await loop.finish_waiting()
            return await loop.finish(turn_lifecycle.NATURAL)
        if not await loop.before_inference():
            return await loop.finish_stopped()
        inf = await loop.infer()
        assistant = inf.acc.message()
        if assistant.refusal:
            assistant = assistant.model_copy(update={"tool_calls": []})  # refusals run nothing
        calls = await loop.commit_assistant(inf, assistant)
        if loop.stop:
            return await loop.finish_stopped()
        if not calls:
            return await loop.answered(assistant)
        await loop.tool_round(calls)  # then RESUME_TOOL_CALL again, at the loop top
