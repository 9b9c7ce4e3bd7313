-- Versions of a turn (issue 11): regenerate an answer, or edit a message and
-- send it again, and keep the earlier version. A turn is a task's user message
-- and its answer; each of its messages names the turn it follows
-- (parent_task_id: that turn's task id, NULL for a conversation's first
-- turn). Turns that follow the same turn are versions of one another, in the
-- order they were written, and a conversation is a tree of turns. A submit
-- that says nothing of versions follows the newest turn of its conversation,
-- which is what this trigger fills in (and what a client that knows nothing
-- of versions shows last); a version submit sets it explicitly afterwards.

-- +goose Up

ALTER TABLE messages ADD COLUMN parent_task_id uuid;

-- Until now every conversation was one line of turns.
UPDATE messages m SET parent_task_id = p.prev
FROM (SELECT conversation_id, task_id,
             lag(task_id) OVER (PARTITION BY conversation_id ORDER BY created_at, id) AS prev
      FROM messages WHERE role = 'user') p
WHERE m.conversation_id = p.conversation_id AND m.task_id = p.task_id AND p.prev IS NOT NULL;

-- A turn's messages by its task id (the versions of a turn, the path of an engine's context).
CREATE INDEX messages_turn ON messages (conversation_id, task_id);

-- A conversation with more than one version of a turn somewhere: an
-- engine's context then follows the path of turns, not the order of writing.
ALTER TABLE conversations ADD COLUMN branched boolean NOT NULL DEFAULT false;

-- +goose StatementBegin
CREATE FUNCTION messages_default_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_task_id IS NULL AND NEW.task_id IS NOT NULL THEN
        NEW.parent_task_id := (
            SELECT m.task_id FROM messages m
            WHERE m.conversation_id = NEW.conversation_id AND m.role = 'user'
              AND m.task_id <> NEW.task_id
            ORDER BY m.created_at DESC, m.id DESC
            LIMIT 1);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER messages_default_parent BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_default_parent();

-- +goose Down

DROP TRIGGER messages_default_parent ON messages;
DROP FUNCTION messages_default_parent();
ALTER TABLE conversations DROP COLUMN branched;
DROP INDEX messages_turn;
ALTER TABLE messages DROP COLUMN parent_task_id;
