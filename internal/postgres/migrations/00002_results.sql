-- Outputs too large to keep in the task row (PROTOCOL.md section 2,
-- result_ref). A result belongs to its task and goes when the task is purged;
-- the assistant message keeps the full text.

-- +goose Up

CREATE TABLE results (
    ref        uuid        PRIMARY KEY,
    user_id    text        NOT NULL CHECK (octet_length(user_id) BETWEEN 1 AND 128),
    task_id    uuid        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    content    text        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX results_task ON results (task_id);

-- +goose Down

DROP TABLE results;
