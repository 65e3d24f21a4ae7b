-- execution.db: the truth layer of one agent room. Status columns use the lifecycle
-- words (running, waiting, done; new, running, suspended, resuming, succeeded, failed,
-- cancelled). Times are Unix seconds (REAL). JSON columns hold JSON text.
PRAGMA user_version = 1;

CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,          -- console | run | invoke | decide
    pid         INTEGER NOT NULL,
    started_at  REAL NOT NULL,
    ended_at    REAL,
    status      TEXT NOT NULL           -- active | ended | crashed
);

CREATE TABLE IF NOT EXISTS thread_groups (
    name               TEXT PRIMARY KEY,
    priority           INTEGER NOT NULL DEFAULT 0,
    max_running_turns  INTEGER NOT NULL DEFAULT 1,
    max_queued_turns   INTEGER NOT NULL DEFAULT 100,
    overflow_policy    TEXT NOT NULL DEFAULT 'reject',
    coalesce           TEXT NOT NULL DEFAULT 'none',
    paused             INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS threads (
    id            TEXT PRIMARY KEY,
    group_name    TEXT NOT NULL,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    last_turn_id  TEXT,
    turn_count    INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS turns (
    id             TEXT PRIMARY KEY,
    thread_id      TEXT NOT NULL REFERENCES threads(id),
    run_id         TEXT NOT NULL REFERENCES runs(id),
    origin         TEXT NOT NULL,
    channel        TEXT,
    sender         TEXT NOT NULL,
    text           TEXT NOT NULL,
    meta           TEXT NOT NULL DEFAULT '{}',
    strategy       TEXT NOT NULL DEFAULT 'react',
    status         TEXT NOT NULL,       -- running | waiting | done
    reason         TEXT,                -- natural | behavior_requested | stopped:<code> | cancelled | suspended | error
    detail         TEXT,
    rounds         INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    final_text     TEXT,
    record         TEXT NOT NULL DEFAULT '{}',  -- strategy data (plan_execute: tool_logs)
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    ended_at       REAL
);
CREATE INDEX IF NOT EXISTS turns_thread ON turns(thread_id, created_at);
CREATE INDEX IF NOT EXISTS turns_status ON turns(status) WHERE status != 'done';

CREATE TABLE IF NOT EXISTS steps (
    id           INTEGER PRIMARY KEY,
    turn_id      TEXT NOT NULL REFERENCES turns(id),
    run_id       TEXT NOT NULL REFERENCES runs(id),
    idx          INTEGER NOT NULL,
    kind         TEXT NOT NULL,         -- inference | tool_round | replay
    status       TEXT NOT NULL,         -- succeeded | failed | cancelled
    summary      TEXT NOT NULL DEFAULT '',
    started_at   REAL NOT NULL,
    ended_at     REAL
);
CREATE INDEX IF NOT EXISTS steps_turn ON steps(turn_id, idx);

CREATE TABLE IF NOT EXISTS tool_calls (
    id             TEXT PRIMARY KEY,    -- agentdeck's call id (what decisions name)
    model_call_id  TEXT NOT NULL,       -- the id the model gave the call
    turn_id        TEXT NOT NULL REFERENCES turns(id),
    thread_id      TEXT NOT NULL,
    step_id        INTEGER NOT NULL,
    idx            INTEGER NOT NULL,
    tool           TEXT NOT NULL,
    args           TEXT NOT NULL,       -- JSON, or the raw text the model sent
    status         TEXT NOT NULL,
    result         TEXT,                -- the result as the model read it
    error          TEXT,
    suspend_reason TEXT,
    decision_id    TEXT,
    has_message    INTEGER NOT NULL DEFAULT 0,  -- 1 placeholder, 2 result in the conversation
    meta           TEXT NOT NULL DEFAULT '{}',  -- strategy data (plan_execute: purpose, todo)
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    ended_at       REAL
);
CREATE INDEX IF NOT EXISTS calls_turn ON tool_calls(turn_id, idx);
CREATE INDEX IF NOT EXISTS calls_open ON tool_calls(status)
    WHERE status IN ('new', 'running', 'suspended', 'resuming');

CREATE TABLE IF NOT EXISTS decisions (
    id          TEXT PRIMARY KEY,
    call_id     TEXT NOT NULL,
    action      TEXT NOT NULL,          -- resume | cancel
    args        TEXT,                   -- JSON: edited arguments
    result      TEXT,                   -- JSON: result used instead of running
    use_result  INTEGER NOT NULL DEFAULT 0,
    reason      TEXT NOT NULL DEFAULT '',
    remember    TEXT,                   -- thread | room
    decided_by  TEXT NOT NULL,
    status      TEXT NOT NULL,          -- queued | applied | duplicate
    note        TEXT,
    created_at  REAL NOT NULL,
    applied_at  REAL
);
CREATE INDEX IF NOT EXISTS decisions_queued ON decisions(call_id) WHERE status = 'queued';

CREATE TABLE IF NOT EXISTS rules (
    id          INTEGER PRIMARY KEY,
    tool        TEXT NOT NULL,
    effect      TEXT NOT NULL,          -- allow | deny
    scope       TEXT NOT NULL,          -- thread | room
    thread_id   TEXT,
    decision_id TEXT,
    created_at  REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS checkpoints (
    id          INTEGER PRIMARY KEY,
    turn_id     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    kind        TEXT NOT NULL,          -- user_message | assistant_turn_committed | tool_results_committed | run_finished
    created_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_turn ON checkpoints(turn_id);

CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY,
    thread_id   TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    role        TEXT NOT NULL,          -- user | assistant | tool
    text        TEXT NOT NULL,
    body        TEXT NOT NULL,          -- the whole ConvMessage as JSON
    created_at  REAL NOT NULL,
    UNIQUE (thread_id, seq)
);

CREATE TABLE IF NOT EXISTS events (
    id          INTEGER PRIMARY KEY,
    at          REAL NOT NULL,
    run_id      TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS turn_requests (
    id              TEXT PRIMARY KEY,   -- becomes the turn's id when admitted
    thread_id       TEXT NOT NULL,
    group_name      TEXT NOT NULL,
    message         TEXT NOT NULL,      -- the Message as JSON
    strategy        TEXT,
    status          TEXT NOT NULL,      -- queued | admitted | coalesced | rejected
    reason          TEXT,
    coalesced_into  TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_queued ON turn_requests(created_at) WHERE status = 'queued';
