package postgres_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestHistoryPagesEveryMessageOnceInOrder pages 1,000 messages, most of
// them sharing one created_at (the clock is frozen), with an awkward page
// size: every message comes exactly once, pages are oldest first inside,
// each page is older than the one before, and messages added while paging
// do not disturb the older pages.
func TestHistoryPagesEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	const tasks = 500
	for i := range tasks {
		if i == 300 { // two groups of equal timestamps
			clk.Advance(time.Millisecond)
		}
		submit(t, s, "alice", newID(), conv, fmt.Sprintf("q%03d", i))
	}
	// Expected order, oldest first: each question, then its placeholder.
	first, next, err := s.History(ctx, "alice", conv, task.Page{Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	pages := [][]task.Message{first}
	// New messages arrive while the client pages back.
	submit(t, s, "alice", newID(), conv, "late")
	for next != "" {
		var page []task.Message
		page, next, err = s.History(ctx, "alice", conv, task.Page{Before: next, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 || len(page) > 7 {
			t.Fatalf("page of %d messages", len(page))
		}
		pages = append(pages, page)
		if len(pages) > 1000 {
			t.Fatal("paging does not end")
		}
	}
	// Pages come newest first; put them back in order and check the whole.
	var all []task.Message
	for i := len(pages) - 1; i >= 0; i-- {
		all = append(all, pages[i]...)
	}
	if len(all) != 2*tasks {
		t.Fatalf("%d messages, want %d", len(all), 2*tasks)
	}
	seen := map[string]bool{}
	for i, m := range all {
		if seen[m.ID] {
			t.Fatalf("message %s twice", m.ID)
		}
		seen[m.ID] = true
		q := i / 2
		if i%2 == 0 && (m.Role != task.RoleUser || m.Content != fmt.Sprintf("q%03d", q)) {
			t.Fatalf("message %d: %s %q, want the user's q%03d", i, m.Role, m.Content, q)
		}
		if i%2 == 1 && (m.Role != task.RoleAssistant || *m.TaskID != *all[i-1].TaskID) {
			t.Fatalf("message %d: %s of task %v, want the placeholder of the question before", i, m.Role, *m.TaskID)
		}
	}
	// Only the last page is short.
	for i, p := range pages[:len(pages)-1] {
		if len(p) != 7 {
			t.Fatalf("page %d has %d messages", i, len(p))
		}
	}

	// Limits: 0 is the default, 1..200 allowed.
	page, _, err := s.History(ctx, "alice", conv, task.Page{})
	if err != nil || len(page) != task.DefaultLimit {
		t.Fatalf("default page: %d messages, %v", len(page), err)
	}
	page, _, err = s.History(ctx, "alice", conv, task.Page{Limit: task.MaxLimit})
	if err != nil || len(page) != task.MaxLimit {
		t.Fatalf("max page: %d messages, %v", len(page), err)
	}
	for _, n := range []int{-1, task.MaxLimit + 1} {
		_, _, err = s.History(ctx, "alice", conv, task.Page{Limit: n})
		wantCode(t, err, task.CodeInvalid)
	}
}

func TestHistoryRefusesForeignCursors(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	conv, other := newID(), newID()
	for range 3 {
		submit(t, s, "alice", newID(), conv, "x")
		submit(t, s, "alice", newID(), other, "y")
	}
	_, msgCursor, err := s.History(ctx, "alice", conv, task.Page{Limit: 2})
	if err != nil || msgCursor == "" {
		t.Fatal(err)
	}
	_, convCursor, err := s.Conversations(ctx, "alice", task.Page{Limit: 1})
	if err != nil || convCursor == "" {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(msgCursor)
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	foreign := map[string]string{
		"garbage":              "not a cursor!",
		"empty base64":         "AAAA",
		"time tampered":        flipped(3),
		"id tampered":          flipped(20),
		"mac tampered":         flipped(len(raw) - 1),
		"truncated":            msgCursor[:len(msgCursor)-2],
		"conversations cursor": convCursor,
	}
	for name, c := range foreign {
		_, _, err := s.History(ctx, "alice", conv, task.Page{Before: c})
		if task.ErrorCode(err) != task.CodeInvalid {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	// A cursor of one conversation does not page another.
	_, _, err = s.History(ctx, "alice", other, task.Page{Before: msgCursor})
	wantCode(t, err, task.CodeInvalid)
	// Nor does a history cursor page the conversations.
	_, _, err = s.Conversations(ctx, "alice", task.Page{Before: msgCursor})
	wantCode(t, err, task.CodeInvalid)
	// A store with another key does not accept it, and neither does one
	// left unconfigured: its key is its own, never a constant.
	for _, key := range [][]byte{[]byte("another key, of thirty-two bytes"), nil} {
		s2, _ := setup(t, postgres.Config{CursorKey: key})
		submit(t, s2, "alice", newID(), conv, "x")
		_, _, err = s2.History(ctx, "alice", conv, task.Page{Before: msgCursor})
		wantCode(t, err, task.CodeInvalid)
	}
}

// TestConversationsPaging pages 45 conversations, newest activity first,
// many with one updated_at, and checks active_task_id.
func TestConversationsPaging(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	var convs []string // oldest activity first
	var tasks []task.Task
	for i := range 45 {
		if i%10 == 0 {
			clk.Advance(time.Second)
		}
		tk := newTask(t, s, "alice")
		convs, tasks = append(convs, tk.ConversationID), append(tasks, tk)
	}
	newTask(t, s, "bob") // not alice's
	// Activity moves a conversation to the front; a finished task leaves it idle.
	clk.Advance(time.Second)
	submit(t, s, "alice", newID(), convs[0], "again")
	convs = append(convs[1:], convs[0])
	if _, err := s.Cancel(ctx, "alice", tasks[1].ID); err != nil {
		t.Fatal(err)
	}

	var got []task.Conversation
	next := ""
	for {
		page, n, err := s.Conversations(ctx, "alice", task.Page{Before: next, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next = n; next == "" {
			break
		}
	}
	if len(got) != len(convs) {
		t.Fatalf("%d conversations, want %d", len(got), len(convs))
	}
	// Newest activity first; among equal times, by id (descending), each once.
	want := map[string]bool{}
	for _, c := range convs {
		want[c] = true
	}
	if got[0].ID != convs[len(convs)-1] {
		t.Fatalf("the conversation with the latest activity is not first")
	}
	for i, c := range got {
		if !want[c.ID] {
			t.Fatalf("conversation %s: unexpected or twice", c.ID)
		}
		delete(want, c.ID)
		if i > 0 {
			p := got[i-1]
			if c.UpdatedAt.After(p.UpdatedAt) || (c.UpdatedAt.Equal(p.UpdatedAt) && c.ID >= p.ID) {
				t.Fatalf("conversation %d (%v %s) is not older than the one before (%v %s)",
					i, c.UpdatedAt, c.ID, p.UpdatedAt, p.ID)
			}
		}
		wantActive := c.ID != tasks[1].ConversationID
		if (c.ActiveTaskID != nil) != wantActive {
			t.Fatalf("conversation %s active task %v, want active %v", c.ID, c.ActiveTaskID, wantActive)
		}
	}
	for _, n := range []int{-5, task.MaxLimit + 1} {
		_, _, err := s.Conversations(ctx, "alice", task.Page{Limit: n})
		wantCode(t, err, task.CodeInvalid)
	}
}
