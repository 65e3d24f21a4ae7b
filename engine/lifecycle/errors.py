"""The one error both state machines raise."""


class IllegalTransition(RuntimeError):
    """A state machine was asked to move between two states that have no edge."""

    def __init__(self, machine: str, src: str, dst: str) -> None:
        super().__init__(f"illegal {machine} transition: {src} -> {dst}")
        self.machine, self.src, self.dst = machine, src, dst
