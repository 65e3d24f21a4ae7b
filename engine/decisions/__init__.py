"""Decisions: an operator's (or a policy's) answer to a suspended tool call, in one place.

A decision's walk, module by module:

- the records are the domain's (engine/domain/decisions.py): `Decision` (resume, cancel;
  after a crash: fail, rerun) and `PendingCall` (a suspended call as an operator sees it,
  with what it `awaits`: a `decision` or a `review`), and the argument hash an approval
  binds to; the store and the providers read them too.
- `record`: a decision arrives (`TurnSupervisor.decide`): checked against its call, recorded
  with its status (queued, duplicate, refused), superseding a stale one a dead run left,
  and handed to the call's turn.
- `binding`: whether a decision fits its call (what the call awaits) and runs only the
  arguments the operator saw (`args_hash`); else it is refused and the call waits on.
- `inbox`: queued decisions by call, waiting for their call to suspend.
- `apply`: what the turn's loop records as it takes a decision (applied, duplicates,
  refused) and what the decision makes of the call (engine/turn/replay.py carries it out).
- `review`: calls a crash left with their outcome unknown: put up for review, what is
  known of them, and their surviving processes.

The SQL is in engine/store/decisions.py. Each module is imported by name
(`engine.decisions.record`); the package itself loads nothing.
"""
