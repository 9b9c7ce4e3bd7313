-- Searching a user's conversations by their titles and the text of their
-- messages (issue 11): Postgres full-text search with the 'simple'
-- configuration (no stemming and no stop words, so it treats every language
-- alike and finds directives such as "/stream" and words being typed by
-- their prefix). Slashes, dots, at signs, underscores and colons count as
-- spaces, so "/stream", "fmt.Println" and "example.com/tether" are found by
-- their words (Postgres's parser would keep them whole as paths, hosts and
-- URLs). The queries use exactly these expressions, so each is answered
-- from its GIN index.

-- +goose Up

CREATE INDEX messages_search ON messages USING gin (to_tsvector('simple', translate(content, '/.@_:', '     ')));
CREATE INDEX conversations_search ON conversations USING gin (to_tsvector('simple', translate(title, '/.@_:', '     ')));

-- +goose Down

DROP INDEX conversations_search;
DROP INDEX messages_search;
