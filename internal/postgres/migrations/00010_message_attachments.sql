-- A message's files, as a table of their own (issue 24): a regenerated answer
-- or an edited message is a new user message that sends the same files
-- again, so an upload may now be held by several messages of one
-- conversation. uploads.message_id stays what it was: the first message that
-- held the upload, which ties its life to the conversation (it is never
-- swept while it is set). This table says which files each message carries,
-- in order, and is what history and the engines read.

-- +goose Up

CREATE TABLE message_attachments (
    message_id uuid     NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    position   smallint NOT NULL CHECK (position BETWEEN 0 AND 9),
    upload_id  uuid     NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    PRIMARY KEY (message_id, position),
    UNIQUE (message_id, upload_id)
);

CREATE INDEX message_attachments_upload ON message_attachments (upload_id);

INSERT INTO message_attachments (message_id, position, upload_id)
SELECT message_id, position, id FROM uploads WHERE message_id IS NOT NULL;

-- +goose Down

DROP TABLE message_attachments;
