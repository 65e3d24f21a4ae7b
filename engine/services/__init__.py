"""The runtime's services: the supervisor that drives turns, the scheduler, the event bus,
the deadlines of suspended calls, the projector to the shared bus and outbound delivery."""
