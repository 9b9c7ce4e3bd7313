-- Issue 23: the trigger messages_default_parent (00007) finds the newest
-- user message of a conversation on each message a submit inserts. Planned
-- for a table where a conversation has a few messages, its query read every
-- message of the conversation and sorted them (a bitmap scan of
-- messages_turn, then a sort), so a submit cost more the longer its
-- conversation: 0.26 ms of a 0.6 ms statement after 300 turns. Without a
-- sort to choose, the planner reads messages_conversation_page backwards
-- and stops at the first user message: the same answer, at a cost that
-- does not grow. Only how the function's query is planned changes, so
-- processes of the release before this one are unaffected.

-- +goose Up

ALTER FUNCTION messages_default_parent() SET enable_sort = off;

-- +goose Down

ALTER FUNCTION messages_default_parent() RESET enable_sort;
