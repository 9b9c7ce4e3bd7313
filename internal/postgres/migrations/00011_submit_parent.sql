-- Issue 23: the versions trigger out of the submit's hot path. The
-- group-commit submit (batch.go) writes each new turn's parent_task_id
-- itself, in the same statement, from the same query the trigger runs; the
-- trigger now fires only for a message inserted without one. It still
-- fills in the parent for every other writer (the full submit transaction,
-- and processes of the release before this one during a rolling deploy),
-- and for a conversation's first turn, whose parent is NULL. The same
-- function, so the rule is the same; only when it runs changes.

-- +goose Up

DROP TRIGGER messages_default_parent ON messages;
CREATE TRIGGER messages_default_parent BEFORE INSERT ON messages
    FOR EACH ROW
    WHEN (NEW.parent_task_id IS NULL AND NEW.task_id IS NOT NULL)
    EXECUTE FUNCTION messages_default_parent();

-- +goose Down

DROP TRIGGER messages_default_parent ON messages;
CREATE TRIGGER messages_default_parent BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_default_parent();
