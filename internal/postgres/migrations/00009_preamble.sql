-- A task made by an API that apps already use (PROTOCOL.md section 11: OpenAI
-- Responses, Chat Completions, the AI SDK) keeps what its request carried
-- besides its content: the model it named, its instructions, its earlier
-- items, its metadata (task.Preamble, as JSON). The engine gets the same
-- context on every attempt, a repeated request with the same Idempotency-Key
-- is told from another one by it, and a later read echoes it. A task made
-- over Tether's own protocol has none (NULL).
--
-- Cheap on a big table: a nullable column without a default is a change of
-- the catalog only (no rewrite, no backfill), and the check is NOT VALID, so
-- adding it reads no rows; it holds for every row written from now on, and
-- the rows before have NULL, which it allows.

-- +goose Up

ALTER TABLE tasks ADD COLUMN preamble jsonb;
ALTER TABLE tasks ADD CONSTRAINT tasks_preamble_object
    CHECK (jsonb_typeof(preamble) = 'object') NOT VALID;

-- +goose Down

ALTER TABLE tasks DROP CONSTRAINT tasks_preamble_object;
ALTER TABLE tasks DROP COLUMN preamble;
