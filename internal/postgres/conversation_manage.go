package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// MaxTitleRunes bounds a title a user gives a conversation.
const MaxTitleRunes = 200

// MaxQueryRunes bounds a search query.
const MaxQueryRunes = 200

// RenameConversation sets the title of the user's conversation and returns
// it as it then stands. The title is trimmed and must be 1..MaxTitleRunes
// runes without control characters. Another user's conversation answers
// like a missing one. Renaming does not move the conversation in the list
// (updated_at is activity, not edits).
func (s *Store) RenameConversation(ctx context.Context, userID, conversationID, title string) (_ task.Conversation, err error) {
	defer classify(&err)
	convID, err := parseID("conversation id", conversationID)
	if err != nil {
		return task.Conversation{}, err
	}
	if err := checkUser(userID); err != nil {
		return task.Conversation{}, err
	}
	title, err = checkTitle(title)
	if err != nil {
		return task.Conversation{}, err
	}
	c, err := scanConversation(s.pool.QueryRow(ctx, `
		UPDATE conversations c SET title = $3 WHERE c.id = $1 AND c.user_id = $2
		RETURNING `+conversationColumns, convID, userID, title))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Conversation{}, task.Errorf(task.CodeNotFound, "conversation not found")
	}
	if err != nil {
		return task.Conversation{}, fmt.Errorf("rename conversation %s: %w", convID, err)
	}
	return c, nil
}

func checkTitle(t string) (string, error) {
	t = strings.TrimSpace(t)
	if !utf8.ValidString(t) {
		return "", task.Errorf(task.CodeInvalid, "title: not valid UTF-8")
	}
	n := utf8.RuneCountInString(t)
	if n == 0 {
		return "", task.Errorf(task.CodeInvalid, "title: empty")
	}
	if n > MaxTitleRunes {
		return "", task.Errorf(task.CodeInvalid, "title: longer than %d characters", MaxTitleRunes)
	}
	if strings.IndexFunc(t, unicode.IsControl) >= 0 {
		return "", task.Errorf(task.CodeInvalid, "title: control characters are not allowed")
	}
	return t, nil
}

// searchMatch is the condition of a conversation found by a query ($2):
// its title, or the text of one of its messages, matches. Both sides are
// the expressions of the GIN indexes of migration 00006.
const searchMatch = `(to_tsvector('simple', translate(c.title, '/.@_:', '     ')) @@ $2::tsquery
		OR c.id IN (SELECT m.conversation_id FROM messages m
		            WHERE to_tsvector('simple', translate(m.content, '/.@_:', '     ')) @@ $2::tsquery))`

// searchSnippet is a few words around the first match in the newest
// message that matches, as plain text ("" when only the title matched).
const searchSnippet = `coalesce((SELECT ts_headline('simple', m.content, $2::tsquery,
		'StartSel="",StopSel="",MaxWords=16,MinWords=6,MaxFragments=1,FragmentDelimiter=" … "')
	FROM messages m
	WHERE m.conversation_id = c.id AND to_tsvector('simple', translate(m.content, '/.@_:', '     ')) @@ $2::tsquery
	ORDER BY m.created_at DESC, m.id DESC LIMIT 1), '')`

const (
	searchFirst = `SELECT ` + conversationColumns + `, ` + searchSnippet + `
		FROM conversations c WHERE c.user_id = $1 AND ` + searchMatch + `
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $3`
	searchBefore = `SELECT ` + conversationColumns + `, ` + searchSnippet + `
		FROM conversations c WHERE c.user_id = $1 AND (c.updated_at, c.id) < ($4, $5) AND ` + searchMatch + `
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $3`
)

// SearchConversations returns the user's conversations whose title or
// messages hold every word of query (the last one also as the start of a
// word, so results come while it is typed), newest activity first, paged
// like Conversations. Each carries a Snippet of the newest message that
// matches. A query with no words is invalid.
func (s *Store) SearchConversations(ctx context.Context, userID, query string, p task.Page) (_ []task.Conversation, _ string, err error) {
	defer classify(&err)
	if err := checkUser(userID); err != nil {
		return nil, "", err
	}
	tsq, err := searchQuery(query)
	if err != nil {
		return nil, "", err
	}
	n, err := limit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	// A search cursor is bound to the user and the query.
	scope := userID + "\x00" + tsq
	before, hasBefore, err := s.decodeCursor(cursorSearch, scope, p.Before)
	if err != nil {
		return nil, "", err
	}
	var rows pgx.Rows
	if hasBefore {
		rows, err = s.pool.Query(ctx, searchBefore, userID, tsq, n+1, before.At, before.ID)
	} else {
		rows, err = s.pool.Query(ctx, searchFirst, userID, tsq, n+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("search conversations: %w", err)
	}
	convs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (task.Conversation, error) {
		var c task.Conversation
		err := row.Scan(&c.ID, &c.Title, &c.UpdatedAt, &c.ActiveTaskID, &c.Snippet)
		c.UpdatedAt = c.UpdatedAt.UTC()
		return c, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("search conversations: %w", err)
	}
	next := ""
	if len(convs) > n {
		convs = convs[:n]
		last := convs[n-1]
		next = s.encodeCursor(cursorSearch, scope, position{At: last.UpdatedAt, ID: last.ID})
	}
	return convs, next, nil
}

// searchQuery turns what a user typed into a tsquery: every word must
// match, the last one as a prefix too. Words are made of letters, digits
// (so "/stream" is the word "stream", and "e-mail" two words), as the
// indexed text is split; nothing the user types reaches the tsquery syntax.
func searchQuery(q string) (string, error) {
	if !utf8.ValidString(q) || utf8.RuneCountInString(q) > MaxQueryRunes {
		return "", task.Errorf(task.CodeInvalid, "q: at most %d characters of text", MaxQueryRunes)
	}
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	if len(words) == 0 {
		return "", task.Errorf(task.CodeInvalid, "q: no words to search for")
	}
	if len(words) > 16 {
		words = words[:16]
	}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = "'" + w + "'"
		if i == len(words)-1 {
			parts[i] += ":*"
		}
	}
	return strings.Join(parts, " & "), nil
}

// scanConversation reads one row of conversationColumns.
func scanConversation(row pgx.Row) (task.Conversation, error) {
	var c task.Conversation
	err := row.Scan(&c.ID, &c.Title, &c.UpdatedAt, &c.ActiveTaskID)
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, err
}
