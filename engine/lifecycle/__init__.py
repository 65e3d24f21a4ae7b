"""The two state machines of a turn: the turn lifecycle and the tool-call lifecycle."""

from engine.lifecycle.call import CallStatus
from engine.lifecycle.errors import IllegalTransition
from engine.lifecycle.turn import TurnStatus

__all__ = ["CallStatus", "IllegalTransition", "TurnStatus"]
