"""The state machines of a turn and around it: the turn and tool-call lifecycles, turn
requests, tool runners, and the statuses of steps and decisions."""

from engine.lifecycle.call import CallStatus
from engine.lifecycle.decision import DecisionStatus
from engine.lifecycle.errors import IllegalTransition
from engine.lifecycle.request import RequestStatus
from engine.lifecycle.runner import RunnerStatus
from engine.lifecycle.step import StepStatus
from engine.lifecycle.turn import TurnStatus

__all__ = [
    "CallStatus",
    "DecisionStatus",
    "IllegalTransition",
    "RequestStatus",
    "RunnerStatus",
    "StepStatus",
    "TurnStatus",
]
