-- execution.db: the truth layer of one agent room. Status columns use the lifecycle
-- words (running, waiting, done; new, running, suspended, resuming, succeeded, failed,
-- cancelled). Times are Unix seconds (REAL). JSON columns hold JSON text.
-- PRAGMA user_version is the room's version: engine/store/migrations.py sets it, and adds
-- the columns a room made by an older agentdeck lacks before this script runs.

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
    message_count INTEGER NOT NULL DEFAULT 0,
    instructions  TEXT                  -- the thread's own, set by an operator (None: none)
);

-- A cancel asked for a turn, kept until the turn ends: whichever runtime runs the turn next
-- (after a crash, or another worker of a cluster) ends it cancelled instead of going on.
CREATE TABLE IF NOT EXISTS cancels (
    turn_id   TEXT PRIMARY KEY,
    reason    TEXT NOT NULL,
    asked_at  REAL NOT NULL
);

-- Each distinct text of instructions a turn ran with, once (engine/domain/instructions.py):
-- the text sent as the system prompt, and the parts it was assembled from.
CREATE TABLE IF NOT EXISTS instructions (
    hash       TEXT PRIMARY KEY,
    text       TEXT NOT NULL,
    parts      TEXT NOT NULL DEFAULT '[]',  -- [[source, text], ...], in order
    created_at REAL NOT NULL
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
    ended_at       REAL,
    instructions   TEXT,                -- the hash of what the turn was told (instructions)
    model          TEXT,                -- provider:model that answered it (None: before 7)
    cached_tokens  INTEGER NOT NULL DEFAULT 0,  -- of input_tokens, read from the provider's cache
    cost           REAL NOT NULL DEFAULT 0,     -- US dollars of its priced tokens
    unpriced       INTEGER NOT NULL DEFAULT 0,  -- its tokens whose model has no known price
    pruned_at      REAL,                -- when retention pruned its steps and events (None: not)
    pruned_steps   INTEGER              -- how many steps it had then (engine/services/retention.py)
);
CREATE INDEX IF NOT EXISTS turns_thread ON turns(thread_id, created_at);
CREATE INDEX IF NOT EXISTS turns_status ON turns(status) WHERE status != 'done';
-- What retention may prune, oldest finished first.
CREATE INDEX IF NOT EXISTS turns_prunable ON turns(ended_at, id)
    WHERE status = 'done' AND pruned_at IS NULL;

CREATE TABLE IF NOT EXISTS steps (
    id           INTEGER PRIMARY KEY,
    turn_id      TEXT NOT NULL REFERENCES turns(id),
    run_id       TEXT NOT NULL REFERENCES runs(id),
    idx          INTEGER NOT NULL,
    kind         TEXT NOT NULL,         -- inference | tool_round | replay
    status       TEXT NOT NULL,         -- succeeded | failed | cancelled
    summary      TEXT NOT NULL DEFAULT '',
    started_at   REAL NOT NULL,
    ended_at     REAL,
    input_tokens   INTEGER NOT NULL DEFAULT 0,  -- an inference's (0: a tool round)
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cached_tokens  INTEGER NOT NULL DEFAULT 0,
    -- cost: US dollars (None: no tokens, or no price); conv_upto: the thread's entries when
    -- the step ended, where a fork of it cuts (None: a step of an older room)
    cost           REAL,
    conv_upto      INTEGER
);
CREATE INDEX IF NOT EXISTS steps_turn ON steps(turn_id, idx);

-- Forks and replays (issue 37, engine/api/forkbook.py): a thread made from another's
-- record, up to a step of one of its turns (a fork), or before one of its turns, to answer
-- that turn's message again on its recorded results (a replay).
CREATE TABLE IF NOT EXISTS forks (
    thread_id    TEXT PRIMARY KEY,          -- the new thread
    kind         TEXT NOT NULL,             -- fork | replay
    from_thread  TEXT NOT NULL,
    from_turn    TEXT NOT NULL,
    from_step    INTEGER,                   -- a fork's step (NULL: a replay)
    upto         INTEGER NOT NULL,          -- the entries copied: seq 0 .. upto - 1
    edited       TEXT NOT NULL DEFAULT '{}',  -- JSON: {seq: the operator's text}
    group_name   TEXT NOT NULL,
    made_by      TEXT NOT NULL,
    made_at      REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS forks_from ON forks(from_thread, from_turn);

-- What turns spent, per UTC day, group, thread and model: written with each step that
-- spent (engine/store/usage.py), so totals per thread, group, room and day, and the
-- budgets that hold them, read a few rows instead of every step.
CREATE TABLE IF NOT EXISTS usage (
    day            TEXT NOT NULL,       -- YYYY-MM-DD, UTC
    group_name     TEXT NOT NULL,
    thread_id      TEXT NOT NULL,
    model          TEXT NOT NULL,       -- provider:model ('' before models were recorded)
    steps          INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cached_tokens  INTEGER NOT NULL DEFAULT 0,
    cost           REAL NOT NULL DEFAULT 0,
    unpriced       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, group_name, thread_id, model)
) WITHOUT ROWID;

-- Budgets an operator set or raised (engine/services/budgets.py), over agentdeck.toml's.
CREATE TABLE IF NOT EXISTS budgets (
    scope    TEXT PRIMARY KEY,          -- turn | thread | thread:ID | group:NAME | room
    tokens   INTEGER,                   -- None: no cap on tokens
    cost     REAL,                      -- None: no cap on cost
    set_by   TEXT NOT NULL,
    set_at   REAL NOT NULL
);

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
    awaiting       TEXT,                -- suspended: 'decision' (approve or cancel) or 'review'
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
    remember    TEXT,                   -- once | thread | room
    decided_by  TEXT NOT NULL,
    status      TEXT NOT NULL,          -- queued | applied | duplicate | superseded | refused
    note        TEXT,
    created_at  REAL NOT NULL,
    applied_at  REAL,
    pattern     TEXT,                   -- with remember: the rule's pattern (NULL: the narrowest)
    args_hash   TEXT,                   -- SHA-256 of the approved arguments (engine/decisions/binding.py)
    sandbox     TEXT                    -- network | outside: how a shell call ran (NULL: as the room says)
);
CREATE INDEX IF NOT EXISTS decisions_queued ON decisions(call_id) WHERE status = 'queued';

-- Rules (issue 15; engine/rules.py says how they match): made by remembered decisions and
-- `agentdeck rules add` (the rules of agentdeck.toml are not stored). A revoked rule stays,
-- marked, for the record.
CREATE TABLE IF NOT EXISTS rules (
    id          INTEGER PRIMARY KEY,
    tool        TEXT NOT NULL,
    effect      TEXT NOT NULL,          -- allow | ask | deny
    scope       TEXT NOT NULL,          -- once | thread | room
    thread_id   TEXT,                   -- the thread a thread (or once) rule is for
    decision_id TEXT,                   -- the remembered decision that made it
    created_at  REAL NOT NULL,
    pattern     TEXT,                   -- NULL: any arguments (every rule before issue 15)
    made_by     TEXT NOT NULL DEFAULT 'operator',
    expires_at  REAL,
    reason      TEXT NOT NULL DEFAULT '',
    revoked_at  REAL,
    revoked_by  TEXT
);

-- The rule that decided a call at the gate (allowed, asked for or denied it), written with
-- the call's row. A rule's uses and last use are counted here (by its key: db:<id>, or
-- toml:<fingerprint> for a rule of agentdeck.toml).
CREATE TABLE IF NOT EXISTS rule_calls (
    call_id     TEXT PRIMARY KEY,
    rule        TEXT NOT NULL,
    effect      TEXT NOT NULL,          -- allow | ask | deny
    at          REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS rule_calls_rule ON rule_calls(rule, at);

-- Breakpoints (issue 36; engine/domain/breakpoints.py): where a turn pauses for an operator,
-- before an inference, before a tool call or after its result. A removed one stays, marked.
CREATE TABLE IF NOT EXISTS breakpoints (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,          -- inference | call | result
    tool        TEXT,                   -- call, result: the tool (NULL: any)
    pattern     TEXT,                   -- the rules' argument pattern for that tool
    scope       TEXT NOT NULL,          -- once | thread | group | room
    thread_id   TEXT,
    group_name  TEXT,
    made_by     TEXT NOT NULL,
    made_at     REAL NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    removed_at  REAL,
    removed_by  TEXT
);

-- The pauses a breakpoint made: one row per `breakpoint` call, written with it.
CREATE TABLE IF NOT EXISTS breakpoint_hits (
    call_id     TEXT NOT NULL,
    breakpoint  TEXT NOT NULL,
    at          REAL NOT NULL,
    PRIMARY KEY (call_id, breakpoint)
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
-- (retention's first pass adds events_turn, engine/store/retention.py)

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

-- Idempotency keys (issue 13): a source that must turn one thing into exactly one request
-- (the pulse loop: a task revision, a chore occurrence, a will fire) names it with a key.
-- The key is written in the transaction that writes its request, and an offer whose key
-- is here gets that request back instead of a new one, in this run or any later one. A
-- table of its own, so a room made before it gains it by this script alone.
CREATE TABLE IF NOT EXISTS request_keys (
    key         TEXT PRIMARY KEY,
    request_id  TEXT NOT NULL,
    created_at  REAL NOT NULL
);

-- Outbound delivery (issue 17; engine/delivery.py): a turn that came from a channel and
-- ended with an answer leaves a row here in its final checkpoint's transaction; the
-- delivery worker sends it (at least once, in order per thread) and marks it. `key` is the
-- idempotency key the channel is given (the turn's id). A thread's next answer waits while
-- an earlier one is pending or retrying.
CREATE TABLE IF NOT EXISTS outbox (
    id          INTEGER PRIMARY KEY,
    turn_id     TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    channel     TEXT NOT NULL,
    reply       TEXT NOT NULL DEFAULT '{}',  -- JSON: where the answer goes (chat, thread ts)
    text        TEXT NOT NULL,
    key         TEXT NOT NULL UNIQUE,
    state       TEXT NOT NULL DEFAULT 'pending',  -- pending | sent | retrying | dead | dropped
    tries       INTEGER NOT NULL DEFAULT 0,
    next_at     REAL NOT NULL,          -- not before: the backoff's next try
    last_error  TEXT,
    created_at  REAL NOT NULL,
    sent_at     REAL
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox(next_at, id)
    WHERE state IN ('pending', 'retrying');
CREATE INDEX IF NOT EXISTS outbox_thread ON outbox(thread_id, id)
    WHERE state IN ('pending', 'retrying');
CREATE INDEX IF NOT EXISTS outbox_state ON outbox(state, id);

-- History (issue 6): what the history screen and `agentdeck history` read without scanning.
-- The marks and counters of turns, threads, runs and decisions are kept current by
-- triggers, inside the writer's own transaction; the marks tool calls give their turns and
-- the full-text indexes are filled in batches (below, and engine/store/index_batch.py).

CREATE INDEX IF NOT EXISTS turns_time ON turns(created_at, id);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started_at, id);
CREATE INDEX IF NOT EXISTS threads_recent ON threads(updated_at, id);
CREATE INDEX IF NOT EXISTS messages_turn ON messages(turn_id, seq);
CREATE INDEX IF NOT EXISTS decisions_call ON decisions(call_id, created_at);
-- The decision audit (issue 36, engine/store/audit.py): decisions and rules' verdicts in
-- the order they were recorded, each table paged by its own index.
CREATE INDEX IF NOT EXISTS decisions_time ON decisions(created_at, id);
CREATE INDEX IF NOT EXISTS rule_calls_time ON rule_calls(at, call_id);

-- One row per facet of a turn: status:<s>, origin:<o>, group:<g>, thread:<id>, run:<id>,
-- tool:<name>, is:failed (a call failed or the turn ended with error), is:denied (a call
-- cancelled by a decision), is:cancelled (the turn was cancelled). Keyed by the turn's
-- created_at, so a filtered list pages newest first by this index alone.
CREATE TABLE IF NOT EXISTS turn_marks (
    mark        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    turn_id     TEXT NOT NULL,
    PRIMARY KEY (mark, created_at, turn_id)
) WITHOUT ROWID;

-- Totals for screens, kept where they are written (no count(*) on a screen path): turns,
-- threads, runs, decisions, and one per mark. Steps, calls and messages, written several
-- times a step, are not counted here: those tables are append-only (only retention deletes,
-- and only steps), so their max(rowid) is how many were ever written, read from the end of
-- their primary key.
CREATE TABLE IF NOT EXISTS counters (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Full text of user and assistant messages that have text (tool results are searched
-- through the calls), and of tool-call arguments, results and errors (by tool_calls'
-- implicit rowid) for calls that are settled or suspended.
--
-- Indexing is not done in the step's transaction: an FTS5 write costs more than the rest
-- of a checkpoint together. Messages are indexed up to the watermark counters.fts:messages
-- (messages are append-only), calls as the batch finds them changed (index_batch.py). The
-- writer indexes both in one batch transaction about once a second, when it closes, and
-- when it opens: History.search lags the writer by about a second, and for that second a
-- call that changed may still be found by its old text.
--
-- To refill the indexes (after a VACUUM, which may renumber tool_calls' rowids: then
-- also rebuild open_calls and the watermark as migrations.py step 4 does):
--   INSERT INTO calls_fts(calls_fts) VALUES ('delete-all');
--   INSERT INTO messages_fts(messages_fts) VALUES ('delete-all');
--   UPDATE counters SET value = 0 WHERE name = 'fts:messages';
--   DELETE FROM fts_unindex; UPDATE open_calls SET indexed = 0;
--   INSERT OR IGNORE INTO fts_queue(rowid) SELECT rowid FROM tool_calls;
-- and open the room. Both indexes hold only some rows of their table, so check them with
-- ('integrity-check', 0) and never 'rebuild' them.
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    text, content='messages', content_rowid='id'
);
CREATE VIRTUAL TABLE IF NOT EXISTS calls_fts USING fts5(
    args, result, error, content='tool_calls', content_rowid='rowid'
);
CREATE TABLE IF NOT EXISTS fts_queue (rowid INTEGER PRIMARY KEY);  -- tool_calls to index (by hand)
CREATE TABLE IF NOT EXISTS fts_unindex (  -- indexed text of settled calls edited since
    id          INTEGER PRIMARY KEY,
    call_rowid  INTEGER NOT NULL,
    args        TEXT,
    result      TEXT,
    error       TEXT
);

-- Rooms made before batch indexing indexed every row in its own transaction, so they are
-- indexed up to their last message and their queue starts empty.
DROP TRIGGER IF EXISTS hist_calls_ai;
DROP TRIGGER IF EXISTS hist_calls_ai2;
DROP TRIGGER IF EXISTS hist_calls_fts_au;
DROP TRIGGER IF EXISTS hist_calls_fts_ad;
DROP TRIGGER IF EXISTS hist_messages_ai;
DROP TRIGGER IF EXISTS hist_messages_fts_au;
DROP TRIGGER IF EXISTS hist_messages_fts_ad;
INSERT INTO counters(name, value)
    SELECT 'fts:messages', coalesce(max(id), 0) FROM messages WHERE true
    ON CONFLICT(name) DO NOTHING;

-- Inside a trigger a conflict clause is overridden by the outer statement's, so marks are
-- added with an upsert (DO NOTHING), which is not.
CREATE TRIGGER IF NOT EXISTS hist_marks_ai AFTER INSERT ON turn_marks BEGIN
    INSERT INTO counters(name, value) VALUES (new.mark, 1)
        ON CONFLICT(name) DO UPDATE SET value = value + 1;
END;
CREATE TRIGGER IF NOT EXISTS hist_marks_ad AFTER DELETE ON turn_marks BEGIN
    UPDATE counters SET value = value - 1 WHERE name = old.mark;
END;

CREATE TRIGGER IF NOT EXISTS hist_turns_ai AFTER INSERT ON turns BEGIN
    INSERT INTO turn_marks(mark, created_at, turn_id) VALUES
        ('status:' || new.status, new.created_at, new.id),
        ('origin:' || new.origin, new.created_at, new.id),
        ('thread:' || new.thread_id, new.created_at, new.id),
        ('run:' || new.run_id, new.created_at, new.id)
        ON CONFLICT DO NOTHING;
    INSERT INTO turn_marks(mark, created_at, turn_id)
        SELECT 'group:' || h.group_name, new.created_at, new.id
        FROM threads h WHERE h.id = new.thread_id
        UNION ALL
        SELECT iif(new.reason = 'error', 'is:failed', 'is:cancelled'), new.created_at, new.id
        WHERE new.reason IN ('error', 'cancelled')
        ON CONFLICT DO NOTHING;
    INSERT INTO counters(name, value) VALUES ('turns', 1)
        ON CONFLICT(name) DO UPDATE SET value = value + 1;
END;
CREATE TRIGGER IF NOT EXISTS hist_turns_status AFTER UPDATE OF status ON turns
WHEN old.status IS NOT new.status BEGIN
    DELETE FROM turn_marks
        WHERE mark = 'status:' || old.status AND created_at = old.created_at AND turn_id = old.id;
    INSERT INTO turn_marks(mark, created_at, turn_id)
        VALUES ('status:' || new.status, new.created_at, new.id)
        ON CONFLICT DO NOTHING;
END;
CREATE TRIGGER IF NOT EXISTS hist_turns_reason AFTER UPDATE OF reason ON turns
WHEN new.reason IN ('error', 'cancelled') AND old.reason IS NOT new.reason BEGIN
    INSERT INTO turn_marks(mark, created_at, turn_id)
        VALUES (iif(new.reason = 'error', 'is:failed', 'is:cancelled'), new.created_at, new.id)
        ON CONFLICT DO NOTHING;
END;

-- A call's marks (tool:<name>; is:failed, is:denied when it fails or a decision cancels it)
-- and its full-text indexing are the batch's work (engine/store/index_batch.py): no
-- trigger on tool_calls runs on a step. The batch's state: the watermark
-- counters['marks:calls'] (the highest tool_calls rowid it has seen) and open_calls.
CREATE TABLE IF NOT EXISTS open_calls (  -- calls the batch saw not yet settled
    rowid    INTEGER PRIMARY KEY,         -- tool_calls' rowid
    indexed  INTEGER NOT NULL DEFAULT 0,  -- 1: suspended, its text below is in calls_fts
    args     TEXT,
    result   TEXT,
    error    TEXT
);
INSERT INTO counters(name, value)
    SELECT 'marks:calls', coalesce(max(rowid), 0) FROM tool_calls WHERE true
    ON CONFLICT(name) DO NOTHING;
DROP TRIGGER IF EXISTS hist_calls_tool;  -- the step's triggers before issue 16
DROP TRIGGER IF EXISTS hist_calls_settled;
DROP TRIGGER IF EXISTS hist_calls_end;
DROP TRIGGER IF EXISTS hist_calls_fts_queue;
DROP TRIGGER IF EXISTS hist_calls_fts_unindex;
DROP TRIGGER IF EXISTS hist_calls_fts_delete;
-- agentdeck never changes a settled call's status, nor deletes a call, and changes its
-- text only when retention prunes its turn (engine/store/retention.py); an operator's
-- edit might. A settled call the batch has indexed (at or below the watermark,
-- not open) that changes leaves its old text in fts_unindex and becomes open again, for
-- the batch to index and mark anew; one deleted leaves the text the index holds. On a
-- step these only test their WHEN (old.status is open when a call settles). A delete
-- lets a new call reuse the highest rowid: do not delete the newest calls.
CREATE TRIGGER IF NOT EXISTS hist_calls_edited AFTER UPDATE OF status, args, result, error
ON tool_calls WHEN old.status IN ('succeeded', 'failed', 'cancelled')
    AND (old.status IS NOT new.status OR old.args IS NOT new.args
         OR old.result IS NOT new.result OR old.error IS NOT new.error)
    AND old.rowid <= (SELECT value FROM counters WHERE name = 'marks:calls')
    AND NOT EXISTS (SELECT 1 FROM open_calls o WHERE o.rowid = old.rowid) BEGIN
    INSERT INTO fts_unindex(call_rowid, args, result, error)
        VALUES (old.rowid, old.args, old.result, old.error);
    INSERT INTO open_calls(rowid) VALUES (old.rowid);
END;
CREATE TRIGGER IF NOT EXISTS hist_calls_deleted AFTER DELETE ON tool_calls BEGIN
    INSERT INTO fts_unindex(call_rowid, args, result, error)
        SELECT old.rowid, old.args, old.result, old.error
        WHERE old.status IN ('succeeded', 'failed', 'cancelled')
          AND old.rowid <= (SELECT value FROM counters WHERE name = 'marks:calls')
          AND NOT EXISTS (SELECT 1 FROM open_calls o WHERE o.rowid = old.rowid)
        UNION ALL
        SELECT o.rowid, o.args, o.result, o.error FROM open_calls o
        WHERE o.rowid = old.rowid AND o.indexed = 1;
    DELETE FROM open_calls WHERE rowid = old.rowid;
    DELETE FROM fts_queue WHERE rowid = old.rowid;
END;

-- A message is in messages_fts when it has text, is not a tool result, and is at or below
-- the watermark (messages are not updated or deleted by agentdeck; these keep an operator's
-- edit from leaving the index unsound).
CREATE TRIGGER IF NOT EXISTS hist_messages_fts_change AFTER UPDATE OF text, role ON messages
WHEN (old.text IS NOT new.text OR old.role IS NOT new.role)
    AND old.id <= (SELECT value FROM counters WHERE name = 'fts:messages') BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text)
        SELECT 'delete', old.id, old.text WHERE old.role != 'tool' AND old.text != '';
    INSERT INTO messages_fts(rowid, text)
        SELECT new.id, new.text WHERE new.role != 'tool' AND new.text != '';
END;
CREATE TRIGGER IF NOT EXISTS hist_messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM counters WHERE name = 'fts:messages') BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text)
        SELECT 'delete', old.id, old.text WHERE old.role != 'tool' AND old.text != '';
END;

CREATE TRIGGER IF NOT EXISTS hist_decisions_ai AFTER INSERT ON decisions BEGIN
    INSERT INTO counters(name, value) VALUES ('decisions', 1)
        ON CONFLICT(name) DO UPDATE SET value = value + 1;
END;
CREATE TRIGGER IF NOT EXISTS hist_threads_ai AFTER INSERT ON threads BEGIN
    INSERT INTO counters(name, value) VALUES ('threads', 1)
        ON CONFLICT(name) DO UPDATE SET value = value + 1;
END;
CREATE TRIGGER IF NOT EXISTS hist_runs_ai AFTER INSERT ON runs BEGIN
    INSERT INTO counters(name, value) VALUES ('runs', 1)
        ON CONFLICT(name) DO UPDATE SET value = value + 1;
END;
