package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

// noPrefillFields fails unless the request body raw carries neither of
// vLLM's continuation fields, as every first attempt must.
func noPrefillFields(t *testing.T, raw []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"continue_final_message", "add_generation_prompt"} {
		if _, ok := m[k]; ok {
			t.Errorf("request without a prefix has %q: %s", k, raw)
		}
	}
}

func TestOpenAIContinuesAfterThePrefix(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamOf(roleChunk, textChunk(" forty"), textChunk("-two."), finishChunk, usageChunk(40, 3))(w, r)
	})
	o, logs := newTestOpenAI(t, f, 0, nil)
	cur := "t-cont"
	hist := []task.Message{
		user("What is 2+2?"), answer("4", "done"),
		// The current task's own messages, as the store returns them: the
		// partial answer is sent once, as the prefix, not as history.
		{Role: task.RoleUser, Content: "And 6×7?", TaskID: &cur},
		{Role: task.RoleAssistant, Content: "The answer is", TaskID: &cur, Status: status("generating")},
	}
	out := &output{}
	in := Input{TaskID: cur, Content: "And 6×7?", History: hist, Prefix: "The answer is"}
	if err := o.Run(context.Background(), in, out); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs)
	}

	// Only the continuation is written: the runner already holds the prefix.
	if got := out.text(); got != " forty-two." {
		t.Fatalf("output %q, want only the continuation", got)
	}
	if !slices.Equal(out.usage, [][2]int{{40, 3}}) {
		t.Fatalf("usage = %v, want [[40 3]]", out.usage)
	}
	// Progress starts with the answer (no "connecting" before the server
	// accepted the prefill), rises and ends at 100.
	if len(out.stages) == 0 || out.stages[0] != stageGenerating || slices.Contains(out.stages, stageConnecting) {
		t.Fatalf("stages %v: want generating first and no connecting", out.stages)
	}
	for i := 1; i < len(out.progress); i++ {
		if out.progress[i] <= out.progress[i-1] {
			t.Fatalf("progress %v does not rise", out.progress)
		}
	}
	if p := out.progress[len(out.progress)-1]; p != 100 {
		t.Fatalf("last progress %d", p)
	}

	body, raw := f.request(t, 0)
	want := []chatMessage{
		{"system", "You are terse."},
		{"user", "What is 2+2?"}, {"assistant", "4"},
		{"user", "And 6×7?"},
		{"assistant", "The answer is"},
	}
	if !slices.Equal(body.Messages, want) {
		t.Fatalf("messages %v\nwant %v", body.Messages, want)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["continue_final_message"] != true || m["add_generation_prompt"] != false {
		t.Fatalf("continuation request lacks vLLM's fields: %s", raw)
	}
	if l := logs.String(); !strings.Contains(l, "continuing the answer") || !strings.Contains(l, "prefix_bytes=13") ||
		!strings.Contains(l, "level=INFO") {
		t.Fatalf("log does not say the answer continues, with the prefix's length:\n%s", l)
	}

	// The same engine's first attempts are plain requests.
	if err := o.Run(context.Background(), Input{TaskID: "t-new", Content: "hi"}, &output{}); err != nil {
		t.Fatal(err)
	}
	body, raw = f.request(t, 1)
	if last := body.Messages[len(body.Messages)-1]; last != (chatMessage{"user", "hi"}) {
		t.Fatalf("last message of a first attempt %v", last)
	}
	noPrefillFields(t, raw)
}

func TestOpenAIRefusedPrefillCannotContinue(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusUnprocessableEntity} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, refusingPrefill(status, func(_ int, w http.ResponseWriter, r *http.Request) {
				streamOf(roleChunk, textChunk("A fresh answer."))(w, r)
			}))
			o, logs := newTestOpenAI(t, f, 2, nil)
			out := &output{}
			err := o.Run(context.Background(), Input{TaskID: "t-refused", Content: "x", Prefix: "Half an ans"}, out)
			if !errors.Is(err, ErrCannotContinue) {
				t.Fatalf("err = %v, want ErrCannotContinue", err)
			}
			if _, ok := AsFailure(err); ok {
				t.Fatalf("a refused prefill became a Failure: %v", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q has the key", err)
			}
			// Nothing written: the runner starts over from keep 0.
			if len(out.deltas) != 0 || len(out.progress) != 0 {
				t.Fatalf("wrote deltas %q and progress %v before refusing", out.deltas, out.progress)
			}
			if n := f.requests.Load(); n != 1 {
				t.Fatalf("%d requests: a refusal is not retried", n)
			}
			// Why, for the operator (the key is checked at cleanup).
			l := logs.String()
			for _, want := range []string{"refused to continue", fmt.Sprintf("HTTP %d", status),
				"Assistant response prefill is incompatible with enable_thinking", "t-refused", "prefix_bytes=11"} {
				if !strings.Contains(l, want) {
					t.Fatalf("log lacks %q:\n%s", want, l)
				}
			}

			// The runner's second call, with no prefix, is answered afresh.
			out = &output{}
			if err := o.Run(context.Background(), Input{TaskID: "t-refused", Content: "x"}, out); err != nil {
				t.Fatalf("Run over: %v", err)
			}
			if got := out.text(); got != "A fresh answer." {
				t.Fatalf("output %q", got)
			}
			out.checkProgress(t)
			_, raw := f.request(t, 1)
			noPrefillFields(t, raw)
		})
	}
}

// Failures that are not about the prefix fail the task as they would
// without one: only 400 and 422 mean "cannot continue".
func TestOpenAIOtherFailuresOfAContinuationAreFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		want     string
		requests int32
	}{
		{http.StatusUnauthorized, FailureKeyRejected, 1},
		{http.StatusNotFound, FailureModelNotFound, 1},
		{http.StatusServiceUnavailable, "model server error (HTTP 503)", 3},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, errorBody("no", "server_error"))
			})
			o, _ := newTestOpenAI(t, f, 2, nil)
			err := o.Run(context.Background(), Input{Content: "x", Prefix: "kept"}, &output{})
			if errors.Is(err, ErrCannotContinue) {
				t.Fatalf("HTTP %d became ErrCannotContinue", tc.status)
			}
			if got := failureOf(t, err); got != tc.want {
				t.Fatalf("failure %q, want %q", got, tc.want)
			}
			if n := f.requests.Load(); n != tc.requests {
				t.Fatalf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestOpenAIRestartModeNeverContinues(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamOf(textChunk("From the top."))(w, r)
	})
	o, logs := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) { c.Continue = ContinueRestart })
	out := &output{}
	err := o.Run(context.Background(), Input{TaskID: "t-restart", Content: "x", Prefix: "kept so far"}, out)
	if !errors.Is(err, ErrCannotContinue) {
		t.Fatalf("err = %v, want ErrCannotContinue", err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("%d requests in restart mode", n)
	}
	if len(out.deltas) != 0 || len(out.progress) != 0 {
		t.Fatalf("wrote deltas %q and progress %v", out.deltas, out.progress)
	}
	if l := logs.String(); !strings.Contains(l, "engine configured to restart; starting the answer over") ||
		!strings.Contains(l, "t-restart") {
		t.Fatalf("log:\n%s", l)
	}

	// Without a prefix, restart mode answers like any other.
	if err := o.Run(context.Background(), Input{Content: "x"}, out); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != "From the top." {
		t.Fatalf("output %q", got)
	}
	_, raw := f.request(t, 0)
	noPrefillFields(t, raw)
}

func TestOpenAIContinuationKeepsPrefixAndCurrentWithinBudget(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) { streamOf(textChunk("."))(w, r) })
	// Each exchange "qN"/"aN" costs 2 × (1 + 4) = 10 estimated tokens.
	var hist []task.Message
	for i := range 10 {
		hist = append(hist, user(fmt.Sprintf("q%d", i)), answer(fmt.Sprintf("a%d", i), "done"))
	}
	o, _ := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) { c.ContextBudget, c.SystemPrompt = 100, "" })
	for i, tc := range []struct {
		name   string
		prefix string
		want   string
	}{
		// 100 tokens hold all 10 exchanges.
		{"no prefix", "", "u:q0 | a:a0 | u:q1 | a:a1 | u:q2 | a:a2 | u:q3 | a:a3 | u:q4 | a:a4 | u:q5 | a:a5 | u:q6 | a:a6 | u:q7 | a:a7 | u:q8 | a:a8 | u:q9 | a:a9 | u:now"},
		// 200 bytes cost 54, leaving 46: the newest 4 exchanges.
		{"prefix takes its share", strings.Repeat("p", 200), "u:q6 | a:a6 | u:q7 | a:a7 | u:q8 | a:a8 | u:q9 | a:a9 | u:now | a:" + strings.Repeat("p", 200)},
		// A prefix over the whole budget leaves no history, and is sent.
		{"prefix over budget", strings.Repeat("p", 2000), "u:now | a:" + strings.Repeat("p", 2000)},
	} {
		if err := o.Run(context.Background(), Input{Content: "now", History: hist, Prefix: tc.prefix}, &output{}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := f.request(t, i)
		if got := roles(body.Messages); got != tc.want {
			t.Fatalf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestOpenAIContinueSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode ContinueMode
		want ContinueMode
	}{
		{"", ContinuePrefill},
		{ContinuePrefill, ContinuePrefill},
		{ContinueRestart, ContinueRestart},
	} {
		o, err := NewOpenAI(OpenAIConfig{Model: "m", Continue: tc.mode})
		if err != nil {
			t.Fatalf("%q: %v", tc.mode, err)
		}
		if got := o.Config().Continue; got != tc.want {
			t.Fatalf("%q: continue %q, want %q", tc.mode, got, tc.want)
		}
	}
	if _, err := NewOpenAI(OpenAIConfig{Model: "m", Continue: "resume"}); err == nil {
		t.Fatal("NewOpenAI accepted continue mode resume")
	}
}
