package postgres_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// samplePreamble is what a Responses request with earlier items makes.
func samplePreamble() *task.Preamble {
	return &task.Preamble{
		API:          "responses",
		Model:        "gpt-test",
		Instructions: "Answer in <b>one</b> line & cite.",
		Items: []task.PreambleItem{
			{Role: "developer", Text: "Use metric units."},
			{Role: "user", Text: "How far is the moon?"},
			{Role: "assistant", Text: "About 384 400 km."},
		},
		Metadata:   map[string]string{"client": "sdk", "trace": "x1"},
		Background: true,
		Options:    map[string]float64{"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 128, "seed": 7},
	}
}

// submitReq is a submit of content with preamble p.
func submitReq(user, taskID, convID, content string, p *task.Preamble) task.SubmitRequest {
	return task.SubmitRequest{UserID: user, TaskID: taskID, ConversationID: convID, Content: content, Preamble: p}
}

// preambleColumn reads tasks.preamble as stored ("NULL" for none).
func preambleColumn(t testing.TB, s *postgres.Store, taskID string) string {
	t.Helper()
	var v *string
	if err := s.Pool().QueryRow(context.Background(),
		`SELECT preamble::text FROM tasks WHERE id = $1`, taskID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		return "NULL"
	}
	return *v
}

// TestPreambleIsStoredAndRead: a preamble submitted with a task, by the
// one-statement submit and by the transaction (a version), comes back on
// every read: Submit's result, Get, Load, Claim, Cancel. A task without one
// stores NULL and reads nil.
func TestPreambleIsStoredAndRead(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	want := samplePreamble()

	sent := samplePreamble()
	first, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "and the sun?", sent))
	if err != nil || !first.Created {
		t.Fatalf("submit: %+v %v", first, err)
	}
	// The store keeps a copy: changing the request afterwards changes nothing.
	sent.Items[0].Text, sent.Metadata["client"] = "changed", "changed"

	again, err := s.SubmitVersion(ctx, task.SubmitRequest{UserID: "alice", TaskID: newID(),
		ConversationID: first.Task.ConversationID, Content: "and the sun?", VersionOf: first.Task.ID,
		Preamble: samplePreamble()})
	if err != nil || !again.Created {
		t.Fatalf("submit a version: %+v %v", again, err)
	}
	for _, res := range []task.SubmitResult{first, again} {
		id := res.Task.ID
		if !reflect.DeepEqual(res.Task.Preamble, want) {
			t.Fatalf("submit result's preamble\n got %+v\nwant %+v", res.Task.Preamble, want)
		}
		got, err := s.Get(ctx, "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, res.Task) {
			t.Fatalf("get\n got %+v\nwant %+v", got, res.Task)
		}
		loaded, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(loaded.Preamble, want) {
			t.Fatalf("load: preamble %+v", loaded.Preamble)
		}
		var stored map[string]any
		if err := json.Unmarshal([]byte(preambleColumn(t, s, id)), &stored); err != nil || stored["api"] != "responses" {
			t.Fatalf("stored preamble %s: %v", preambleColumn(t, s, id), err)
		}
	}
	if c := claim(t, s, first.Task.ID); !reflect.DeepEqual(c.Preamble, want) {
		t.Fatalf("claim: preamble %+v", c.Preamble)
	}
	cancelled, err := s.Cancel(ctx, "alice", again.Task.ID)
	if err != nil || !cancelled.Cancelled || !reflect.DeepEqual(cancelled.Task.Preamble, want) {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}

	plain := newTask(t, s, "alice")
	if plain.Preamble != nil || preambleColumn(t, s, plain.ID) != "NULL" {
		t.Fatalf("a task without a preamble: %+v, stored %s", plain.Preamble, preambleColumn(t, s, plain.ID))
	}
	if got, err := s.Get(ctx, "alice", plain.ID); err != nil || got.Preamble != nil {
		t.Fatalf("get of a task without a preamble: %+v %v", got.Preamble, err)
	}

	// The wire Task object has no preamble.
	b, err := json.Marshal(first.Task)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "preamble") || strings.Contains(string(b), "metric") {
		t.Fatalf("the wire task carries the preamble: %s", b)
	}
}

// TestPreambleIsPartOfASubmitsIdentity: a repeat of a task id with an equal
// preamble is the same submit (a lookup, or the retry of a failed task);
// with another one, or with one where there was none or none where there
// was one, it is a conflict that changes nothing.
func TestPreambleIsPartOfASubmitsIdentity(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	withOne, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "question", samplePreamble()))
	if err != nil {
		t.Fatal(err)
	}
	without := newTask(t, s, "alice")

	// Equal: another value with the same content; and empty lists and maps
	// are the same as missing ones.
	equal := samplePreamble()
	res, err := s.Submit(ctx, submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question", equal))
	if err != nil || res.Created || res.Retried || !reflect.DeepEqual(res.Task, withOne.Task) {
		t.Fatalf("repeat with an equal preamble: %+v %v", res, err)
	}
	bare := &task.Preamble{API: "chat.completions"}
	bareTask, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "q", bare))
	if err != nil {
		t.Fatal(err)
	}
	emptied := &task.Preamble{API: "chat.completions", Items: []task.PreambleItem{},
		Metadata: map[string]string{}, Options: map[string]float64{}}
	if res, err := s.Submit(ctx, submitReq("alice", bareTask.Task.ID, bareTask.Task.ConversationID, "q", emptied)); err != nil || res.Created {
		t.Fatalf("repeat with empty lists for missing ones: %+v %v", res, err)
	}
	// Numbers come back from jsonb as the same float64s, whatever their size.
	extreme := func() *task.Preamble {
		return &task.Preamble{API: "responses", Options: map[string]float64{"huge": 1e300, "tiny": 5e-324,
			"tenth": 0.1, "third": 1.0 / 3, "negative zero": math.Copysign(0, -1), "big int": 1 << 62}}
	}
	numbers, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "q", extreme()))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Submit(ctx, submitReq("alice", numbers.Task.ID, numbers.Task.ConversationID, "q", extreme())); err != nil || res.Created {
		t.Fatalf("repeat with extreme numbers: %+v %v", res, err)
	}
	rows := rowCounts(t, s)

	other := func(edit func(p *task.Preamble)) *task.Preamble {
		p := samplePreamble()
		edit(p)
		return p
	}
	cases := []struct {
		name string
		req  task.SubmitRequest
	}{
		{"other instructions", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question",
			other(func(p *task.Preamble) { p.Instructions = "Be long." }))},
		{"one item fewer", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question",
			other(func(p *task.Preamble) { p.Items = p.Items[1:] }))},
		{"another option", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question",
			other(func(p *task.Preamble) { p.Options["temperature"] = 0.3 }))},
		{"other metadata", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question",
			other(func(p *task.Preamble) { p.Metadata["trace"] = "x2" }))},
		{"not background", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question",
			other(func(p *task.Preamble) { p.Background = false }))},
		{"none where there was one", submitReq("alice", withOne.Task.ID, withOne.Task.ConversationID, "question", nil)},
		{"one where there was none", submitReq("alice", without.ID, without.ConversationID, without.Input, samplePreamble())},
		{"an empty one where there was none", submitReq("alice", without.ID, without.ConversationID, without.Input, &task.Preamble{})},
	}
	for _, tc := range cases {
		_, err := s.Submit(ctx, tc.req)
		wantCode(t, err, task.CodeConflict)
		if after := rowCounts(t, s); after != rows {
			t.Errorf("%s: rows %v, were %v", tc.name, after, rows)
		}
	}
	if got, _ := s.Get(ctx, "alice", withOne.Task.ID); !reflect.DeepEqual(got, withOne.Task) {
		t.Fatalf("a conflicting submit changed the task:\n got %+v\nwant %+v", got, withOne.Task)
	}
	if got := preambleColumn(t, s, without.ID); got != "NULL" {
		t.Fatalf("a conflicting submit gave a task a preamble: %s", got)
	}

	// A failed task: another preamble is a conflict and no new attempt, the
	// same one is its retry.
	r := claim(t, s, withOne.Task.ID)
	if _, err := s.Finish(ctx, task.Finish{Status: task.StatusFailed, Error: ptr("demo failure"),
		Snapshot: task.Snapshot{TaskID: r.ID, Attempt: r.Attempt, FromSeq: r.Seq, Seq: r.Seq + 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Submit(ctx, submitReq("alice", r.ID, r.ConversationID, "question", nil))
	wantCode(t, err, task.CodeConflict)
	if got, _ := s.Get(ctx, "alice", r.ID); got.Status != task.StatusFailed || got.Attempt != 1 {
		t.Fatalf("a conflicting submit retried the failed task: %+v", got)
	}
	retried, err := s.Submit(ctx, submitReq("alice", r.ID, r.ConversationID, "question", samplePreamble()))
	if err != nil || !retried.Retried || retried.Task.Attempt != 2 || !reflect.DeepEqual(retried.Task.Preamble, samplePreamble()) {
		t.Fatalf("retry with the same preamble: %+v %v", retried, err)
	}

	// A version repeats the same way.
	v := task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: without.ConversationID,
		Content: without.Input, VersionOf: without.ID, Preamble: samplePreamble()}
	if res, err := s.SubmitVersion(ctx, v); err != nil || !res.Created {
		t.Fatalf("version: %+v %v", res, err)
	}
	if res, err := s.SubmitVersion(ctx, v); err != nil || res.Created {
		t.Fatalf("repeat of the version: %+v %v", res, err)
	}
	v.Preamble = nil
	_, err = s.SubmitVersion(ctx, v)
	wantCode(t, err, task.CodeConflict)
}

// TestPreambleIsChecked: a preamble the store cannot keep, or one too large,
// is refused with a clear error before anything is written, by both submits.
func TestPreambleIsChecked(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	turn := newTask(t, s, "alice")

	items := func(n int) []task.PreambleItem {
		out := make([]task.PreambleItem, n)
		for i := range out {
			out[i] = task.PreambleItem{Role: "user", Text: "x"}
		}
		return out
	}
	// overhead is the JSON of a preamble with empty instructions, so a
	// preamble can be made exactly as large as the limit.
	base := task.Preamble{API: "responses"}
	b, _ := json.Marshal(base)
	overhead := len(b) + len(`,"instructions":""`)
	sized := func(n int, fill string) *task.Preamble {
		return &task.Preamble{API: "responses", Instructions: strings.Repeat(fill, n-overhead)}
	}

	cases := []struct {
		name string
		p    *task.Preamble
		code task.Code
	}{
		{"too many items", &task.Preamble{API: "responses", Items: items(task.MaxPreambleItems + 1)}, task.CodeInvalid},
		{"a tool item", &task.Preamble{Items: []task.PreambleItem{{Role: "tool", Text: "x"}}}, task.CodeInvalid},
		{"an item without a role", &task.Preamble{Items: []task.PreambleItem{{Text: "x"}}}, task.CodeInvalid},
		{"an upper-case role", &task.Preamble{Items: []task.PreambleItem{{Role: "User", Text: "x"}}}, task.CodeInvalid},
		{"NUL in an item", &task.Preamble{Items: []task.PreambleItem{{Role: "user", Text: "a\x00b"}}}, task.CodeInvalid},
		{"invalid UTF-8 in an item", &task.Preamble{Items: []task.PreambleItem{{Role: "assistant", Text: "caf\xc3"}}}, task.CodeInvalid},
		{"NUL in the instructions", &task.Preamble{Instructions: "be\x00brief"}, task.CodeInvalid},
		{"invalid UTF-8 in the instructions", &task.Preamble{Instructions: "\xff"}, task.CodeInvalid},
		{"NUL in the model", &task.Preamble{Model: "m\x00"}, task.CodeInvalid},
		{"NUL in metadata", &task.Preamble{Metadata: map[string]string{"k": "\x00"}}, task.CodeInvalid},
		{"invalid UTF-8 in a metadata key", &task.Preamble{Metadata: map[string]string{"\xfe": "v"}}, task.CodeInvalid},
		{"NaN option", &task.Preamble{Options: map[string]float64{"temperature": math.NaN()}}, task.CodeInvalid},
		{"infinite option", &task.Preamble{Options: map[string]float64{"top_p": math.Inf(1)}}, task.CodeInvalid},
		{"one byte too large", sized(task.MaxPreambleBytes+1, "a"), task.CodeTooLarge},
		{"large items", &task.Preamble{Items: []task.PreambleItem{
			{Role: "user", Text: strings.Repeat("q", task.MaxPreambleBytes/2)},
			{Role: "assistant", Text: strings.Repeat("a", task.MaxPreambleBytes/2)}}}, task.CodeTooLarge},
		{"a huge text", &task.Preamble{Instructions: strings.Repeat("i", 8<<20)}, task.CodeTooLarge},
		{"large metadata", &task.Preamble{Metadata: map[string]string{"k": strings.Repeat("m", task.MaxPreambleBytes)}}, task.CodeTooLarge},
	}
	rows := rowCounts(t, s)
	for _, tc := range cases {
		_, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "hi", tc.p))
		wantCode(t, err, tc.code)
		if task.ErrorMessage(err) == "internal error" || !strings.Contains(task.ErrorMessage(err), "preamble") {
			t.Errorf("%s: message %q does not say what is wrong", tc.name, task.ErrorMessage(err))
		}
		_, err = s.SubmitVersion(ctx, task.SubmitRequest{UserID: "alice", TaskID: newID(),
			ConversationID: turn.ConversationID, Content: "hi", VersionOf: turn.ID, Preamble: tc.p})
		wantCode(t, err, tc.code)
		if after := rowCounts(t, s); after != rows {
			t.Fatalf("%s: rows %v, were %v", tc.name, after, rows)
		}
	}

	// At the limits: accepted, and read back as sent. Text of HTML
	// characters counts as itself, not as its \u escapes.
	for _, p := range []*task.Preamble{
		{API: "responses", Items: items(task.MaxPreambleItems)},
		sized(task.MaxPreambleBytes, "a"),
		sized(task.MaxPreambleBytes, "<"),
		{Items: []task.PreambleItem{{Role: "system", Text: ""}, {Role: "developer", Text: "日本語 ☃"}}},
	} {
		res, err := s.Submit(ctx, submitReq("alice", newID(), newID(), "hi", p))
		if err != nil {
			t.Fatalf("preamble at the limits (%d items, %d bytes of instructions): %v",
				len(p.Items), len(p.Instructions), err)
		}
		got, err := s.Get(ctx, "alice", res.Task.ID)
		if err != nil || !reflect.DeepEqual(got.Preamble, p) {
			t.Fatalf("read back: %v", err)
		}
	}
}
