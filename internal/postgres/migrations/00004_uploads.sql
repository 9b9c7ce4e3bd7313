-- Uploads and attachments (PROTOCOL.md section 10). A file is sent with the
-- tus protocol before any message names it; its bytes live in the upload
-- store (a directory by default, see internal/uploads), and this row is
-- everything else: whose it is, how far it got, what it is, and how long it
-- may wait for a message. A finished upload keeps its SHA-256 and, when it is
-- a text file, its text, so runners on other hosts read attachments from
-- here and never from a gateway's disk.

-- +goose Up

CREATE TABLE uploads (
    id          uuid        PRIMARY KEY,
    user_id     text        NOT NULL CHECK (octet_length(user_id) BETWEEN 1 AND 128),
    name        text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 255),
    type        text        NOT NULL CHECK (octet_length(type) BETWEEN 1 AND 255),
    size        bigint      NOT NULL CHECK (size >= 0),
    -- Bytes stored so far (tus Upload-Offset).
    received    bigint      NOT NULL DEFAULT 0 CHECK (received BETWEEN 0 AND size),
    finished_at timestamptz,
    sha256      bytea       CHECK (octet_length(sha256) = 32),
    -- The whole file, when it is valid UTF-8 without NUL of at most 256 KiB.
    text        text        CHECK (octet_length(text) <= 262144),
    -- The user message it is attached to, and its place in that message.
    message_id  uuid        REFERENCES messages (id),
    position    smallint    CHECK (position BETWEEN 0 AND 9),
    -- An upload no message holds goes (with its bytes) at expires_at; an
    -- attached one lives as long as its conversation.
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    -- Finished means every byte is in and hashed.
    CHECK ((finished_at IS NOT NULL) = (sha256 IS NOT NULL)),
    CHECK (finished_at IS NULL OR received = size),
    CHECK (text IS NULL OR finished_at IS NOT NULL),
    -- Attached: placed, finished and kept; not attached: it expires.
    CHECK ((message_id IS NULL) = (position IS NULL)),
    CHECK ((message_id IS NULL) = (expires_at IS NOT NULL)),
    CHECK (message_id IS NULL OR finished_at IS NOT NULL),
    UNIQUE (message_id, position)
);

CREATE INDEX uploads_expiry ON uploads (expires_at) WHERE expires_at IS NOT NULL;

-- The uploads a submit attached, in order: part of its identity, like its
-- content (a repeat with other attachments is a conflict).
ALTER TABLE tasks ADD COLUMN attachments uuid[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(attachments) <= 10);

-- +goose Down

ALTER TABLE tasks DROP COLUMN attachments;
DROP TABLE uploads;
