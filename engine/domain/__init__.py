"""The domain's vocabulary: messages and conversations, the events the runtime publishes,
where a turn stands (outcome), and the rules that allow, ask for or deny calls. The state
machines are engine/lifecycle/, decisions engine/decisions/."""
