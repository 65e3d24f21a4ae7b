"""Runtime loops: the sources of turn requests (pulse, and later server, poll, hook).

A loop watches something (room files, a socket, a mailbox) and turns what it sees into
`Message`s offered to the scheduler. Loops never run turns themselves, so every turn,
whatever started it, goes through the same admission, budgets and coalescing.
"""
