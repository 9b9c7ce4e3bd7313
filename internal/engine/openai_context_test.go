package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func status(s string) *string { return &s }

func user(content string) task.Message {
	return task.Message{Role: task.RoleUser, Content: content}
}

func answer(content, st string) task.Message {
	m := task.Message{Role: task.RoleAssistant, Content: content}
	if st != "" {
		m.Status = status(st)
	}
	return m
}

// roles renders messages compactly: "s:..." "u:..." "a:...".
func roles(msgs []chatMessage) string {
	var b []string
	for _, m := range msgs {
		b = append(b, m.Role[:1]+":"+m.Content)
	}
	return strings.Join(b, " | ")
}

func TestBuildMessages(t *testing.T) {
	t.Parallel()
	// Each exchange "qN"/"aN" costs estimateTokens(2 bytes)*2 = 2*(1+4) = 10.
	hist := []task.Message{
		user("q1"), answer("a1", "done"),
		user("q2"), answer("a2", "done"),
		user("q3"), answer("a3", ""), // no status: a finished answer too
	}
	for _, tc := range []struct {
		name   string
		system string
		hist   []task.Message
		budget int
		want   string
	}{
		{"all fit", "sys", hist, 30, "s:sys | u:q1 | a:a1 | u:q2 | a:a2 | u:q3 | a:a3 | u:now"},
		{"newest kept", "sys", hist, 29, "s:sys | u:q2 | a:a2 | u:q3 | a:a3 | u:now"},
		{"one exchange", "", hist, 10, "u:q3 | a:a3 | u:now"},
		{"nothing fits", "sys", hist, 9, "s:sys | u:now"},
		{"no budget", "sys", hist, -1, "s:sys | u:now"},
		{"no history", "sys", nil, 100, "s:sys | u:now"},
		{"unusable answers drop their question", "", []task.Message{
			user("q1"), answer("a1", "done"),
			user("q2"), answer("partial", "failed"),
			user("q3"), answer("half", "cancelled"),
			user("q4"), answer("", "generating"),
			user("q5"), answer("", "done"),
			user("q6"), // its answer is missing altogether
			user("q7"), answer("a7", "done"),
			answer("orphan", "done"),
		}, 1000, "u:q1 | a:a1 | u:q7 | a:a7 | u:now"},
		{"current task ignored", "", []task.Message{
			user("q1"), answer("a1", "done"),
			{Role: task.RoleUser, Content: "now", TaskID: status("cur")},
			{Role: task.RoleAssistant, Content: "", TaskID: status("cur"), Status: status("generating")},
		}, 1000, "u:q1 | a:a1 | u:now"},
		{"earlier attempt of the current task ignored", "", []task.Message{
			{Role: task.RoleUser, Content: "now", TaskID: status("cur")},
			{Role: task.RoleAssistant, Content: "old answer", TaskID: status("cur"), Status: status("done")},
		}, 1000, "u:now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := roles(buildMessages(tc.system, tc.hist, "cur", "now", "", tc.budget, nil))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestBuildMessagesWithPrefix(t *testing.T) {
	t.Parallel()
	// Exchanges cost 10 each (see TestBuildMessages); the prefix "pp" 5.
	hist := []task.Message{
		user("q1"), answer("a1", "done"),
		user("q2"), answer("a2", "done"),
		user("q3"), answer("a3", "done"),
	}
	for _, tc := range []struct {
		budget int
		want   string
	}{
		{35, "s:sys | u:q1 | a:a1 | u:q2 | a:a2 | u:q3 | a:a3 | u:now | a:pp"},
		{34, "s:sys | u:q2 | a:a2 | u:q3 | a:a3 | u:now | a:pp"},
		{14, "s:sys | u:now | a:pp"},
		{3, "s:sys | u:now | a:pp"}, // the prefix alone is over budget
		{-1, "s:sys | u:now | a:pp"},
	} {
		if got := roles(buildMessages("sys", hist, "", "now", "pp", tc.budget, nil)); got != tc.want {
			t.Errorf("budget %d:\n got %s\nwant %s", tc.budget, got, tc.want)
		}
	}
}

func TestBuildMessagesKeepsAContiguousNewestStretch(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 400) // 100 + 4 tokens
	hist := []task.Message{
		user("old"), answer("small", "done"),
		user(big), answer("a", "done"),
		user("new"), answer("b", "done"),
	}
	// The big exchange does not fit; the small older one would, but
	// sending it without the one between would be a gap.
	got := roles(buildMessages("", hist, "", "now", "", 40, nil))
	if want := "u:new | a:b | u:now"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestBuildMessagesStaysWithinBudget(t *testing.T) {
	t.Parallel()
	var hist []task.Message
	for i := range 200 {
		hist = append(hist, user(fmt.Sprintf("question %d %s", i, strings.Repeat("q", i%37))),
			answer(fmt.Sprintf("answer %d %s", i, strings.Repeat("é", i%53)), "done"))
	}
	for _, budget := range []int{0, 1, 50, 333, 1000, 6000, 1 << 20} {
		msgs := buildMessages("system", hist, "", "current", "", budget, nil)
		if msgs[0] != (chatMessage{"system", "system"}) || msgs[len(msgs)-1] != (chatMessage{"user", "current"}) {
			t.Fatalf("budget %d: system or current misplaced", budget)
		}
		mid := msgs[1 : len(msgs)-1]
		used := 0
		for _, m := range mid {
			used += estimateTokens(m.Content)
		}
		if used > budget {
			t.Fatalf("budget %d: history of %d tokens", budget, used)
		}
		// The kept history is exactly the newest len(mid) messages.
		if len(mid) > 0 {
			tail := hist[len(hist)-len(mid):]
			for i, m := range mid {
				if m.Content != tail[i].Content || m.Role != string(tail[i].Role) {
					t.Fatalf("budget %d: message %d is not the newest stretch", budget, i)
				}
			}
		}
		// And one more exchange would not have fitted.
		if len(mid) < len(hist) {
			prev := hist[len(hist)-len(mid)-2 : len(hist)-len(mid)]
			if used+estimateTokens(prev[0].Content)+estimateTokens(prev[1].Content) <= budget {
				t.Fatalf("budget %d: left out an exchange that fits", budget)
			}
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 4, "a": 5, "abcd": 5, "abcde": 6, "日本": 6} {
		if got := estimateTokens(s); got != want {
			t.Errorf("estimateTokens(%q) = %d, want %d", s, got, want)
		}
	}
}
