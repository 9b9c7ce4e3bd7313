-- Issue 12: costs that grew with use.
--
-- A running attempt's output is kept as append-only chunks, one per snapshot
-- batch, instead of rewriting tasks.output (output || batch) on every batch,
-- which cost O(n^2) bytes over a long answer. tasks.output holds the prefix
-- the attempt kept; the chunks of the current attempt follow it. A finish, a
-- failure, a cancel and a hand-over fold the chunks back into tasks.output
-- and delete them, so a task that is not running has none.

-- +goose Up

CREATE TABLE task_output (
    task_id uuid    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt integer NOT NULL CHECK (attempt >= 1),
    -- The seq of the batch's last event: chunks concatenate in seq order.
    seq     bigint  NOT NULL CHECK (seq >= 1),
    text    text    NOT NULL,
    PRIMARY KEY (task_id, attempt, seq)
);

-- A task's conversation is its user's: the one-statement submit inserts the
-- task before it checks the conversation, and this key refuses a task in
-- another user's conversation whatever the order of concurrent writes.
ALTER TABLE conversations ADD CONSTRAINT conversations_id_user UNIQUE (id, user_id);
ALTER TABLE tasks ADD CONSTRAINT tasks_conversation_owner
    FOREIGN KEY (conversation_id, user_id) REFERENCES conversations (id, user_id);

-- When a pending task was last dispatched again by maintenance, so each
-- process does not re-send every waiting task every round.
ALTER TABLE tasks ADD COLUMN redispatched_at timestamptz;

-- A finished task's events are in Postgres: its subject in the JetStream log
-- is purged after a grace period for late resumers, once.
ALTER TABLE tasks ADD COLUMN log_purged boolean NOT NULL DEFAULT false;
CREATE INDEX tasks_log_unpurged ON tasks (finished_at) WHERE finished_at IS NOT NULL AND NOT log_purged;

-- +goose Down

DROP INDEX tasks_log_unpurged;
ALTER TABLE tasks DROP COLUMN log_purged;
ALTER TABLE tasks DROP COLUMN redispatched_at;
ALTER TABLE tasks DROP CONSTRAINT tasks_conversation_owner;
ALTER TABLE conversations DROP CONSTRAINT conversations_id_user;
DROP TABLE task_output;
