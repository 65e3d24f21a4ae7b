"""The state machines of a turn and its records: the turn and tool-call lifecycles, and
the statuses of steps and decisions."""

from engine.lifecycle.call import CallStatus
from engine.lifecycle.decision import DecisionStatus
from engine.lifecycle.errors import IllegalTransition
from engine.lifecycle.step import StepStatus
from engine.lifecycle.turn import TurnStatus

__all__ = ["CallStatus", "DecisionStatus", "IllegalTransition", "StepStatus", "TurnStatus"]
