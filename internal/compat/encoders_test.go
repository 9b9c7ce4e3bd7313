package compat

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/task"
)

// run feeds updates to an encoder as streamTask does and returns the SSE
// text it wrote.
func run(t *testing.T, enc encoder, updates ...gateway.Update) string {
	t.Helper()
	rec := httptest.NewRecorder()
	out := &sseWriter{w: rec, rc: http.NewResponseController(rec), timeout: time.Second}
	var ans answer
	for i, u := range updates {
		done, err := enc.update(out, &ans, ans.apply(u))
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if done && i != len(updates)-1 {
			t.Fatalf("the stream ended at update %d of %d", i+1, len(updates))
		}
	}
	return rec.Body.String()
}

func snapshot(status task.Status, attempt int, seq int64, output string) gateway.Update {
	return gateway.Update{Snapshot: &task.Task{ID: "0b7e6b2e-0000-4000-8000-000000000001", Status: status,
		Attempt: attempt, Seq: seq, Output: output, CreatedAt: time.Unix(1, 0)}}
}

func delta(attempt int, seq int64, text string) gateway.Update {
	return gateway.Update{Event: task.Event{Type: task.EventDelta, Attempt: attempt, Seq: seq, Text: text}}
}

func status(s task.Status, attempt int, seq int64, keep int) gateway.Update {
	return gateway.Update{Event: task.Event{Type: task.EventStatus, Status: s, Attempt: attempt, Seq: seq, Keep: keep}}
}

// ids lists the SSE ids a Responses stream carries.
func ids(sse string) []string {
	var out []string
	for _, l := range strings.Split(sse, "\n") {
		if v, ok := strings.CutPrefix(l, "id: "); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestResponsesContinuedAttemptIsInvisible(t *testing.T) {
	// The runner of attempt 1 is lost after "ab"; attempt 2 keeps both
	// bytes and goes on: the stream shows one answer, numbered on.
	sse := run(t, &responsesEncoder{api: &api{cfg: Config{}.withDefaults()}, last: -1},
		snapshot(task.StatusRunning, 1, 1, ""), delta(1, 2, "ab"),
		status(task.StatusPending, 2, 3, 2), status(task.StatusRunning, 2, 4, 2),
		delta(2, 5, "cd"), status(task.StatusDone, 2, 6, 0))
	if got := strings.Join(ids(sse), ","); got != "0,1,2,3,5,7,8,9,10,11" {
		t.Fatalf("numbers %s", got)
	}
	if strings.Contains(sse, "restarted") || !strings.Contains(sse, `"text":"abcd"`) {
		t.Fatalf("stream:\n%s", sse)
	}
}

func TestResponsesRestartedAttemptEndsTheStream(t *testing.T) {
	// Attempt 2 starts over (keep 0) below what the stream sent: the
	// stream ends with an error event rather than show two answers as one.
	sse := run(t, &responsesEncoder{api: &api{cfg: Config{}.withDefaults()}, last: -1},
		snapshot(task.StatusRunning, 1, 1, ""), delta(1, 2, "ab"), status(task.StatusPending, 2, 3, 0))
	if !strings.Contains(sse, `"type":"error"`) || !strings.Contains(sse, `"code":"restarted"`) {
		t.Fatalf("stream:\n%s", sse)
	}
	if got := ids(sse); got[len(got)-1] != "6" {
		t.Fatalf("the error event is #%s; want #6, after the delta #5", got[len(got)-1])
	}
}

func TestResponsesResumeInsideACharacter(t *testing.T) {
	// "é" is two bytes: a starting_after that falls between them (the
	// answer's byte 1) starts the replay at the character.
	sse := run(t, &responsesEncoder{api: &api{cfg: Config{}.withDefaults()}, last: 4, sent: 1},
		snapshot(task.StatusDone, 1, 3, "éa"))
	if !strings.Contains(sse, `"delta":"éa"`) || !strings.Contains(sse, "id: 6\n") {
		t.Fatalf("stream:\n%s", sse)
	}
}

func TestResponsesSnapshotBehindAResumingClient(t *testing.T) {
	// A client that has "abcd" (#7) resumes while Postgres's snapshot
	// still holds "ab": the log's events bring it up and past.
	sse := run(t, &responsesEncoder{api: &api{cfg: Config{}.withDefaults()}, last: 7, sent: 4},
		snapshot(task.StatusRunning, 1, 2, "ab"), delta(1, 3, "cd"), delta(1, 4, "ef"), status(task.StatusDone, 1, 5, 0))
	if got := strings.Join(ids(sse), ","); got != "9,10,11,12,13" || !strings.Contains(sse, `"delta":"ef"`) {
		t.Fatalf("numbers %s, stream:\n%s", got, sse)
	}
}

func TestUIStreamChunks(t *testing.T) {
	sse := run(t, &uiEncoder{}, snapshot(task.StatusRunning, 1, 2, "he"), delta(1, 3, "llo"), status(task.StatusDone, 1, 4, 0))
	var types []string
	for _, l := range strings.Split(sse, "\n") {
		if v, ok := strings.CutPrefix(l, "data: "); ok {
			if v == "[DONE]" {
				types = append(types, v)
				continue
			}
			i := strings.Index(v, `"type":"`) + len(`"type":"`)
			types = append(types, v[i:i+strings.IndexByte(v[i:], '"')])
		}
	}
	want := "start,start-step,text-start,text-delta,text-delta,text-end,finish-step,finish,[DONE]"
	if got := strings.Join(types, ","); got != want {
		t.Fatalf("chunks %s; want %s", got, want)
	}
	failed := run(t, &uiEncoder{}, snapshot(task.StatusRunning, 1, 2, "he"), gateway.Update{Event: task.Event{
		Type: task.EventStatus, Status: task.StatusFailed, Attempt: 1, Seq: 3, Error: ptr("demo failure")}})
	if !strings.Contains(failed, `{"type":"error","errorText":"demo failure"}`) || !strings.HasSuffix(failed, "data: [DONE]\n\n") {
		t.Fatalf("failed stream:\n%s", failed)
	}
}

func TestChatCompletionFailureEndsWithAnError(t *testing.T) {
	sse := run(t, &chatEncoder{api: &api{cfg: Config{}.withDefaults()}}, snapshot(task.StatusRunning, 1, 2, "he"),
		gateway.Update{Event: task.Event{Type: task.EventStatus, Status: task.StatusFailed, Attempt: 1, Seq: 3, Error: ptr("demo failure")}})
	if !strings.Contains(sse, `"code":"demo failure"`) || strings.Contains(sse, "[DONE]") {
		t.Fatalf("stream:\n%s", sse)
	}
}

func ptr(s string) *string { return &s }

func TestCurrentPathFollowsTheNewestVersion(t *testing.T) {
	msg := func(taskID, parent string, role task.Role) task.Message {
		m := task.Message{TaskID: &taskID, Role: role}
		if parent != "" {
			m.ParentTaskID = &parent
		}
		return m
	}
	// Turn b has two versions, b and b2; c follows b2.
	msgs := []task.Message{msg("a", "", "user"), msg("a", "", "assistant"), msg("b", "a", "user"), msg("b", "a", "assistant"),
		msg("b2", "a", "user"), msg("b2", "a", "assistant"), msg("c", "b2", "user"), msg("c", "b2", "assistant")}
	var got []string
	for _, m := range currentPath(msgs) {
		got = append(got, *m.TaskID)
	}
	if strings.Join(got, ",") != "a,a,b2,b2,c,c" {
		t.Fatalf("path %v", got)
	}
}
