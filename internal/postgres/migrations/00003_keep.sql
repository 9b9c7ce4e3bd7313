-- Protocol 1.1: a lost runner's answer is continued, not restarted. keep is
-- how many bytes of output the current attempt kept from the attempt before
-- it; its pending and running status events carry it, so every tab truncates
-- to exactly that prefix and appends what follows.

-- +goose Up

ALTER TABLE tasks ADD COLUMN keep integer NOT NULL DEFAULT 0
    CHECK (keep >= 0);

-- +goose Down

ALTER TABLE tasks DROP COLUMN keep;
