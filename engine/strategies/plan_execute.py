"""plan_execute: a planner decides each round's tool commands; the loop executes them.

Round state (`done_plans`, `last_round_records`, `round_index`) is derived from the turn's
committed calls, so a turn that suspends and resumes, even after a restart, plans on from
where it was. Commands become ordinary tool calls: the same gates, suspension, decisions
and checkpoints as react. After the loop the records become `action_results` for the final
answer, and the raw records are kept as `tool_logs` on the turn.

The planner also reads the seed's `user_extra_requirement`: what the sender asks beyond
the message's text, given as the message's meta `extra_requirement` (the seed's framework
takes it from the prompt's instructions; a message's meta is where agentdeck's sender can
put such a thing, through the API or a runtime loop). It is kept on the turn's record, so
a turn resumed from execution.db still has it, and the final answer is asked to meet it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from engine.domain.messages import ConvMessage, ToolCallPart
from engine.domain.plans import (
    ACTION_RESULTS,
    NextActionScanner,
    PlanDecision,
    action_results,
    normalize,
    parse_planner_text,
)
from engine.lifecycle import CallStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.providers.base import AssistantAccumulator, ModelRequest
from engine.turn.call import CallState

if TYPE_CHECKING:
    from engine.turn.loop import TurnLoop

PLANNER_SYSTEM = """You plan tool use for an agent. Answer with one JSON object only:
{"next_action": "execute" | "response",
 "execution_commands": [{"purpose": str, "tool_name": str, "tool_kwargs": {...},
                         "todo_suggestion": str}]}
Put "next_action" first. Choose "response" when the user's request can be answered from
what is already known (done_plans)."""

EXTRA_REQUIREMENT = "extra_requirement"  # the message's meta key, and the turn record's

FINAL_INSTRUCTION = (
    "Use the action results above (keyed by purpose) to answer the user's request. "
    "Say plainly when an action failed or is still waiting for a decision."
)


def initial_record(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A new turn's record from its message's meta: the extra requirement, when it is text."""
    value = meta.get(EXTRA_REQUIREMENT)
    extra = value.strip() if isinstance(value, str) else ""
    return {EXTRA_REQUIREMENT: extra} if extra else {}


def record_of(call: CallState) -> dict[str, Any]:
    """A call as the planner and the turn's tool_logs see it."""
    success = call.status is CallStatus.SUCCEEDED
    return {
        "purpose": call.meta.get("purpose") or f"Use {call.tool}",
        "tool_name": call.tool,
        "kwargs": call.args if isinstance(call.args, dict) else {},
        "todo_suggestion": call.meta.get("todo_suggestion", ""),
        "next": call.meta.get("todo_suggestion", ""),
        "success": success,
        "result": call.result if success else None,
        "error": None if success else call.model_text(),
    }


def rounds(loop: TurnLoop) -> list[list[dict[str, Any]]]:
    """The turn's executed rounds, in order: each a list of records in command order."""
    by_step: dict[int, list[CallState]] = {}
    for call in loop.turn.calls.values():
        if call.meta.get("plan_round") is not None:
            by_step.setdefault(call.step_id, []).append(call)
    return [
        [record_of(c) for c in sorted(by_step[s], key=lambda c: c.idx)] for s in sorted(by_step)
    ]


def user_input(loop: TurnLoop) -> str:
    for msg in reversed(loop.conv.messages):
        if msg.role == "user":
            return msg.text
    return ""


def planner_request(
    loop: TurnLoop, done: list[list[dict[str, Any]]], max_rounds: int
) -> ModelRequest:
    state = {
        "user_input": user_input(loop),
        "user_extra_requirement": loop.turn.record.get(EXTRA_REQUIREMENT, ""),
        "available_tools": loop.step_schemas(),  # as plugins left them for this round
        "done_plans": [r for rnd in done for r in rnd],
        "last_round_result": done[-1] if done else [],
        "round_index": len(done),
        "max_rounds": max_rounds,
    }
    text = json.dumps(state, default=str)
    return ModelRequest(
        messages=[ConvMessage(role="user", text=text)],
        system=loop.system(PLANNER_SYSTEM),
        purpose="plan",
    )


def short_circuit() -> Callable[[AssistantAccumulator], bool]:
    """A predicate that closes the planner stream as soon as next_action is "response"."""
    scanner, seen = NextActionScanner(), [0]

    def check(acc: AssistantAccumulator) -> bool:
        fresh, seen[0] = acc.text[seen[0] :], len(acc.text)
        return scanner.feed("".join(fresh)) == "response" if fresh else False

    return check


def as_assistant(decision: PlanDecision, round_index: int) -> tuple[ConvMessage, list[dict]]:
    """The round's commands as an assistant message with tool calls (and their plan data)."""
    calls = [
        ToolCallPart(id=f"plan{round_index}_{i}", name=c.tool_name, arguments=c.tool_kwargs)
        for i, c in enumerate(decision.commands)
    ]
    metas = [
        {"plan_round": round_index, "purpose": c.purpose, "todo_suggestion": c.todo_suggestion}
        for c in decision.commands
    ]
    text = "; ".join(c.purpose for c in decision.commands)
    return ConvMessage(role="assistant", text=text, tool_calls=calls), metas


async def run(loop: TurnLoop) -> None:
    max_rounds = loop.ctx.config.runtime.plan_max_rounds
    while True:
        await loop.resume_tool_calls()
        done = rounds(loop)
        pending = loop.turn.suspended()
        if (
            pending
            and done
            and all(not r["success"] for r in done[-1])
            and not loop.conv.awaits_answer
        ):
            return await loop.finish_waiting()
        if len(done) >= max_rounds:
            loop.turn.record["max_rounds_reached"] = max_rounds
            break
        if not await loop.before_inference():
            return await loop.finish_stopped()
        inf = await loop.infer(
            planner_request(loop, done, max_rounds), kind="plan", publish_text=False,
            stop_when=short_circuit(),
        )  # fmt: skip
        decision = normalize(parse_planner_text("".join(inf.acc.text)))
        if inf.closed_early:
            decision = PlanDecision("response")
        if not decision.executes:
            loop.step_end("succeeded", f"plan: {decision.next_action}"
                          + (" (short-circuit)" if inf.closed_early else ""))  # fmt: skip
            break
        assistant, metas = as_assistant(decision, len(done))
        calls = await loop.commit_assistant(inf, assistant, metas)
        if loop.stop:
            return await loop.finish_stopped()
        await loop.tool_round(calls)
        if all(c.status is CallStatus.SUSPENDED for c in calls):
            await loop.resume_tool_calls()
            if all(c.status is CallStatus.SUSPENDED for c in calls):
                return await loop.finish_waiting()
    await final_answer(loop)


async def final_answer(loop: TurnLoop) -> None:
    """The answer is always produced: from action_results when there are any."""
    records = [r for rnd in rounds(loop) for r in rnd]
    messages = loop.view()
    if records:
        loop.turn.record["tool_logs"] = records
        results = json.dumps(action_results(records), default=str, indent=1)
        messages.append(
            ConvMessage(role="user", text=f"{ACTION_RESULTS}{results}\n\n{FINAL_INSTRUCTION}")
        )
    if not await loop.before_inference():  # the answer is a step like any: its phases too
        return await loop.finish_stopped()
    extra = loop.turn.record.get(EXTRA_REQUIREMENT)
    system = f"The user's extra requirement for this answer: {extra}" if extra else None
    inf = await loop.infer(ModelRequest(messages=messages, system=loop.system(system)))
    assistant = inf.acc.message().model_copy(update={"tool_calls": []})
    await loop.commit_assistant(inf, assistant)
    if loop.stop:
        return await loop.finish_stopped()
    if loop.turn.record.get("max_rounds_reached"):
        loop.turn.final_text = assistant.text
        detail = f"plan_execute reached max_rounds ({loop.turn.record['max_rounds_reached']})"
        if loop.turn.suspended():
            return await loop.finish_waiting()
        return await loop.finish(turn_lifecycle.NATURAL, detail)
    await loop.answered(assistant)
