"""One turn: its state, its loop, its tool calls, and the narrow context it runs in.

A turn's loop never holds the runtime: it gets a `TurnContext` (clock, ids, publish,
commit, the model, tools, plugins, decisions, rules, config), so the turn, its calls, the
strategies and the runner depend on that context and on nothing above it.
"""
