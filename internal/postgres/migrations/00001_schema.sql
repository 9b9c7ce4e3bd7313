-- Tether's schema. The rules of internal/task live here too, as constraints,
-- so a bug in Go (or a hand-written UPDATE) cannot store a state the domain
-- forbids. Every timestamp is written by the Go side (the store's clock), never
-- by now(), so tests can drive time.

-- +goose Up

CREATE TABLE conversations (
    id         uuid        PRIMARY KEY,
    user_id    text        NOT NULL CHECK (octet_length(user_id) BETWEEN 1 AND 128),
    title      text        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Keyset pages of a user's conversations, newest activity first.
CREATE INDEX conversations_user_page ON conversations (user_id, updated_at, id);

CREATE TABLE messages (
    id              uuid        PRIMARY KEY,
    conversation_id uuid        NOT NULL REFERENCES conversations (id),
    role            text        NOT NULL CHECK (role IN ('user', 'assistant')),
    content         text        NOT NULL,
    -- No foreign key: finished tasks are purged after the idempotency TTL,
    -- their messages stay.
    task_id         uuid,
    -- Only an assistant message has a status.
    status          text CHECK (status IN ('generating', 'done', 'failed', 'cancelled')),
    created_at      timestamptz NOT NULL,
    CHECK ((role = 'assistant') = (status IS NOT NULL))
);

-- Keyset pages of a conversation's messages.
CREATE INDEX messages_conversation_page ON messages (conversation_id, created_at, id);

CREATE TABLE tasks (
    id                   uuid        PRIMARY KEY,
    user_id              text        NOT NULL CHECK (octet_length(user_id) BETWEEN 1 AND 128),
    conversation_id      uuid        NOT NULL REFERENCES conversations (id),
    -- The placeholder this task fills. Deferred: the task row is inserted
    -- first, so the unique key on id decides between concurrent submits before
    -- any message is written.
    assistant_message_id uuid        NOT NULL UNIQUE
                                     REFERENCES messages (id) DEFERRABLE INITIALLY DEFERRED,
    status               text        NOT NULL
                                     CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    attempt              integer     NOT NULL CHECK (attempt >= 1),
    -- The attempt the current submission started with: lease expiries may
    -- add attempts up to the configured maximum counted from here.
    submit_attempt       integer     NOT NULL CHECK (submit_attempt BETWEEN 1 AND attempt),
    seq                  bigint      NOT NULL CHECK (seq >= 0),
    progress             integer     NOT NULL CHECK (progress BETWEEN 0 AND 100),
    input                text        NOT NULL,
    output               text        NOT NULL,
    error                text,
    result_ref           text,
    runner_id            text,
    lease_until          timestamptz,
    stream_pos           bigint      NOT NULL DEFAULT 0 CHECK (stream_pos >= 0),
    cancel_requested     boolean     NOT NULL DEFAULT false,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    finished_at          timestamptz,
    -- A finished task has a finish time, and only a finished one.
    CHECK ((status IN ('done', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
    -- A failed task says why.
    CHECK (status <> 'failed' OR error IS NOT NULL),
    -- A running task is held by a runner with a lease.
    CHECK (status <> 'running' OR (runner_id IS NOT NULL AND lease_until IS NOT NULL))
);

-- Maintenance: pending tasks by age, running tasks by lease, finished by age.
CREATE INDEX tasks_pending ON tasks (updated_at) WHERE status = 'pending';
CREATE INDEX tasks_running_lease ON tasks (lease_until) WHERE status = 'running';
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
-- A conversation's active task.
CREATE INDEX tasks_conversation_active ON tasks (conversation_id)
    WHERE status IN ('pending', 'running');

CREATE TABLE task_transitions (
    id          bigint      PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    task_id     uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL CHECK (attempt >= 1),
    -- NULL: the task was created.
    from_status text,
    to_status   text        NOT NULL,
    reason      text        NOT NULL,
    at          timestamptz NOT NULL,
    -- The arrows of PROTOCOL.md section 3 (task.CanTransition), and creation
    -- ('' -> pending).
    CHECK ((coalesce(from_status, ''), to_status) IN (
        ('', 'pending'),
        ('pending', 'running'), ('pending', 'cancelled'), ('pending', 'failed'),
        ('running', 'done'), ('running', 'failed'), ('running', 'cancelled'), ('running', 'pending'),
        ('failed', 'pending')))
);

CREATE INDEX task_transitions_task ON task_transitions (task_id, id);

-- +goose Down

DROP TABLE task_transitions;
DROP TABLE tasks;
DROP TABLE messages;
DROP TABLE conversations;
