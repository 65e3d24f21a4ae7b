"""The one error every state machine raises, and the one check they share."""

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


class IllegalTransition(RuntimeError):
    """A state machine was asked to move between two states that have no edge."""

    def __init__(self, machine: str, src: str, dst: str) -> None:
        super().__init__(f"illegal {machine} transition: {src} -> {dst}")
        self.machine, self.src, self.dst = machine, src, dst


def checked(machine: str, table: Mapping[E, frozenset[E]], kind: type[E], src: E | str,
            dst: E | str) -> E:  # fmt: skip
    """Return `dst` (as `kind`) if `table` has the edge `src -> dst`, else raise
    IllegalTransition naming the machine and both states."""
    src, dst = kind(src), kind(dst)
    if dst not in table[src]:
        raise IllegalTransition(machine, str(src.value), str(dst.value))
    return dst
