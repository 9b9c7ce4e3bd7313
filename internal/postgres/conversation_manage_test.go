package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

func TestRenameConversation(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	submit(t, s, "alice", newID(), conv, "## What is a **lease**?")
	c, err := s.RenameConversation(ctx, "alice", conv, "  Leases, explained  ")
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != conv || c.Title != "Leases, explained" || c.ActiveTaskID == nil {
		t.Fatalf("renamed = %+v", c)
	}
	convs, _, err := s.Conversations(ctx, "alice", task.Page{})
	if err != nil || len(convs) != 1 || convs[0].Title != "Leases, explained" {
		t.Fatalf("list after rename = %+v, %v", convs, err)
	}
	for _, bad := range []string{"", "   ", "a\x01b", strings.Repeat("x", postgres.MaxTitleRunes+1)} {
		if _, err := s.RenameConversation(ctx, "alice", conv, bad); task.ErrorCode(err) != task.CodeInvalid {
			t.Errorf("title %q: %v, want invalid", bad, err)
		}
	}
	// Another user's conversation and a missing one answer alike.
	for _, c := range []struct{ user, conv string }{{"bob", conv}, {"alice", newID()}} {
		if _, err := s.RenameConversation(ctx, c.user, c.conv, "x"); task.ErrorCode(err) != task.CodeNotFound {
			t.Errorf("rename %s of %s: %v, want not_found", c.conv, c.user, err)
		}
	}
}

func TestNewConversationTitleIsShortAndClean(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	submit(t, s, "alice", newID(), newID(), "## How do I **bold** text in `markdown`?\n\nmore")
	convs, _, err := s.Conversations(context.Background(), "alice", task.Page{})
	if err != nil || convs[0].Title != "How do I bold text in markdown?" {
		t.Fatalf("title = %q, %v", convs[0].Title, err)
	}
}

func TestSearchConversations(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	convA, convB, convC := newID(), newID(), newID()
	submit(t, s, "alice", newID(), convA, "Tell me about zebras")
	clk.Advance(time.Second)
	submit(t, s, "alice", newID(), convB, "/stream 300 30")
	clk.Advance(time.Second)
	submit(t, s, "alice", newID(), convC, "Something else")
	clk.Advance(time.Second)
	// A later message of C mentions zebras too; bob's conversation never shows.
	submit(t, s, "alice", newID(), convC, "and the Zebra crossing on Abbey Road")
	submit(t, s, "bob", newID(), newID(), "zebras everywhere")

	ids := func(cs []task.Conversation) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	search := func(q string, p task.Page) ([]task.Conversation, string) {
		t.Helper()
		cs, next, err := s.SearchConversations(ctx, "alice", q, p)
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		return cs, next
	}
	// By message text, as a prefix while typed, newest activity first, with a snippet.
	cs, next := search("zeb", task.Page{})
	if got := ids(cs); len(got) != 2 || got[0] != convC || got[1] != convA || next != "" {
		t.Fatalf("zeb: %v next %q, want [C A]", got, next)
	}
	if !strings.Contains(cs[0].Snippet, "Zebra crossing") {
		t.Fatalf("snippet = %q", cs[0].Snippet)
	}
	// By title after a rename, every word must match, directives by their word.
	if _, err := s.RenameConversation(ctx, "alice", convA, "Striped horses"); err != nil {
		t.Fatal(err)
	}
	if got, _ := search("striped HORSE", task.Page{}); len(got) != 1 || got[0].ID != convA || got[0].Snippet != "" {
		t.Fatalf("title search: %+v", got)
	}
	if got, _ := search("stream", task.Page{}); len(ids(got)) != 1 || got[0].ID != convB {
		t.Fatalf("directive search: %+v", got)
	}
	if got, _ := search("zebras crossing", task.Page{}); len(got) != 0 {
		t.Fatalf("words in different messages of different conversations: %+v", got)
	}
	// Paged like the list.
	page1, next := search("zeb", task.Page{Limit: 1})
	if len(page1) != 1 || page1[0].ID != convC || next == "" {
		t.Fatalf("page 1: %v next %q", ids(page1), next)
	}
	page2, next2 := search("zeb", task.Page{Limit: 1, Before: next})
	if len(page2) != 1 || page2[0].ID != convA || next2 != "" {
		t.Fatalf("page 2: %v next %q", ids(page2), next2)
	}
	// A cursor belongs to its query; a query of no words is refused.
	if _, _, err := s.SearchConversations(ctx, "alice", "striped", task.Page{Limit: 1, Before: next}); task.ErrorCode(err) != task.CodeInvalid {
		t.Fatalf("cursor of another query: %v", err)
	}
	for _, q := range []string{"", "  ", "!!! ':*", strings.Repeat("a", postgres.MaxQueryRunes+1)} {
		if _, _, err := s.SearchConversations(ctx, "alice", q, task.Page{}); task.ErrorCode(err) != task.CodeInvalid {
			t.Errorf("q %q: %v, want invalid", q, err)
		}
	}
	// tsquery syntax in what the user types is only words.
	if got, _ := search(`zebra' | 'x`, task.Page{}); len(got) != 0 {
		t.Fatalf("injection-looking query: %+v", ids(got))
	}
}
