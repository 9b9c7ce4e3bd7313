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

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
)

func TestOpenAIStreamsExactOutput(t *testing.T) {
	t.Parallel()
	// Chunks as a server sends them, including the awkward ones: empty
	// content, spaces at both ends, escapes, a UTF-8 character cut between
	// two chunks as raw bytes, and a surrogate pair cut between two.
	chunks := []string{
		roleChunk,
		textChunk("  Hello"),
		textChunk(""),
		textChunk(", wörld ☃ "),
		contentChunk(`"caf` + "\xc3" + `"`),
		contentChunk(`"` + "\xa9" + ` \"quoted\" \\ \/ \t tab\n"`),
		contentChunk(`"\ud83d"`),
		contentChunk(`"\ude00 smile 日本語"`),
		contentChunk(`null`),
		textChunk("\r\ntrailing spaces   "),
		finishChunk,
		usageChunk(31, 9),
	}
	want := "  Hello, wörld ☃ café \"quoted\" \\ / \t tab\n😀 smile 日本語\r\ntrailing spaces   "

	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		// A keep-alive comment, then each event; one line is written in
		// two halves that split a multi-byte character.
		fmt.Fprint(w, ": keep-alive\n\n")
		for i, c := range chunks {
			line := "data: " + c + "\n\n"
			if i == 3 {
				half := strings.Index(line, "ö") + 1
				fmt.Fprint(w, line[:half])
				w.(http.Flusher).Flush()
				line = line[half:]
			}
			fmt.Fprint(w, line)
			w.(http.Flusher).Flush()
		}
		sse(w, "[DONE]")
	})
	o, logs := newTestOpenAI(t, f, 0, nil)
	out := &output{}
	err := o.Run(context.Background(), Input{TaskID: "t1", Content: "Say hello"}, out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, logs)
	}
	if got := out.text(); got != want {
		t.Fatalf("output\n got %q\nwant %q", got, want)
	}
	if !slices.Equal(out.usage, [][2]int{{31, 9}}) {
		t.Fatalf("usage = %v, want [[31 9]]", out.usage)
	}
	out.checkProgress(t)
	if p, s := out.progress[len(out.progress)-1], out.stages[len(out.stages)-1]; p != 100 || s != "done" {
		t.Fatalf("last progress %d %q, want 100 done", p, s)
	}
	if !slices.Contains(out.stages, "generating") {
		t.Fatalf("stages %v lack generating", out.stages)
	}

	// The request is what an OpenAI server expects.
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("%d requests", n)
	}
	h, body := f.headers[0], f.bodies[0]
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("Content-Type") != "application/json" ||
		h.Get("Accept") != "text/event-stream" {
		t.Fatalf("headers %v", h)
	}
	if body.Model != "test-model" || !body.Stream || !body.StreamOptions.IncludeUsage ||
		body.Temperature != nil || body.MaxTokens != 0 {
		t.Fatalf("body %+v", body)
	}
	wantMsgs := []chatMessage{{"system", "You are terse."}, {"user", "Say hello"}}
	if !slices.Equal(body.Messages, wantMsgs) {
		t.Fatalf("messages %v, want %v", body.Messages, wantMsgs)
	}
}

func TestOpenAIRequestOmitsUnsetOptions(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) { streamOf(textChunk("ok"))(w, r) })
	o, _ := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) { c.APIKey, c.SystemPrompt = "", "" })
	if err := o.Run(context.Background(), Input{Content: "hi"}, &output{}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(f.raw[0], &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"temperature", "max_tokens"} {
		if _, ok := m[k]; ok {
			t.Errorf("request has %q though it is unset", k)
		}
	}
	if got := fmt.Sprint(m["messages"]); got != "[map[content:hi role:user]]" {
		t.Errorf("messages = %s", got)
	}
	if h := f.headers[0].Get("Authorization"); h != "" {
		t.Errorf("Authorization %q sent without a key", h)
	}
}

func TestOpenAIProgressWithMaxTokens(t *testing.T) {
	t.Parallel()
	var events []string
	for i := range 5 {
		events = append(events, textChunk(fmt.Sprintf("w%d ", i)))
	}
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamOf(append([]string{roleChunk}, events...)...)(w, r)
	})
	temp := 0.3
	o, _ := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) { c.MaxTokens, c.Temperature = 10, &temp })
	out := &output{}
	if err := o.Run(context.Background(), Input{Content: "count"}, out); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != "w0 w1 w2 w3 w4 " {
		t.Fatalf("output %q", got)
	}
	out.checkProgress(t)
	// 5 tokens of a 10 token cap: the last generating progress is 50.
	gen := -1
	for i, s := range out.stages {
		if s == "generating" {
			gen = out.progress[i]
		}
	}
	if gen != 50 {
		t.Fatalf("last generating progress %d, want 50 (progress %v %v)", gen, out.progress, out.stages)
	}
	if b := f.bodies[0]; b.MaxTokens != 10 || b.Temperature == nil || *b.Temperature != 0.3 {
		t.Fatalf("body %+v", b)
	}
}

func TestGenerationProgress(t *testing.T) {
	t.Parallel()
	for _, maxTokens := range []int{0, 1, 7, 100, 4096} {
		last := 0
		for tokens := 0; tokens <= 20000; tokens++ {
			p := generationProgress(tokens, maxTokens)
			if p < last || p > 99 || (tokens > 0 && p < 1) {
				t.Fatalf("max %d: progress(%d) = %d after %d", maxTokens, tokens, p, last)
			}
			last = p
		}
		if maxTokens == 0 && last > 50 {
			t.Fatalf("uncapped progress reached %d", last)
		}
		if maxTokens > 0 && last != 99 {
			t.Fatalf("max %d: progress stops at %d, want 99", maxTokens, last)
		}
	}
	if p := generationProgress(500, 0); p != 25 {
		t.Fatalf("progress(500) = %d, want 25", p)
	}
}

func TestOpenAIReasoningIsNotOutput(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamOf(roleChunk, reasoningChunk("Let me think"), reasoningChunk(" hard."), textChunk("42"))(w, r)
	})
	o, _ := newTestOpenAI(t, f, 0, nil)
	out := &output{}
	if err := o.Run(context.Background(), Input{Content: "answer?"}, out); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != "42" {
		t.Fatalf("output %q, want only the answer", got)
	}
	out.checkProgress(t)
	if !slices.Contains(out.stages, "thinking") {
		t.Fatalf("stages %v lack thinking", out.stages)
	}
	if len(out.usage) != 0 {
		t.Fatalf("usage %v recorded though the server sent none", out.usage)
	}
}

func TestOpenAICoalescesTinyChunks(t *testing.T) {
	t.Parallel()
	var events []string
	var want strings.Builder
	for i := range 1000 {
		s := string(rune('a' + i%26))
		events = append(events, textChunk(s))
		want.WriteString(s)
	}
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		// All at once, without a flush per event.
		startSSE(w)
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	o, _ := newTestOpenAI(t, f, 0, nil)
	out := &output{}
	if err := o.Run(context.Background(), Input{Content: "x"}, out); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != want.String() {
		t.Fatalf("output differs")
	}
	if n := len(out.deltas); n > 500 {
		t.Fatalf("%d deltas for 1000 one-byte chunks: not coalesced", n)
	}
	if out.deltas[0] != "a" {
		t.Fatalf("first delta %q: the first token should go out at once", out.deltas[0])
	}
}

func TestOpenAIFlushesPendingTextWhileTheServerPauses(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, textChunk("first"), textChunk(" second"))
		select { // pause until the test has seen " second"
		case <-release:
		case <-r.Context().Done():
			return
		}
		sse(w, textChunk(" third"), "[DONE]")
	})
	o, _ := newTestOpenAI(t, f, 0, nil)
	out := &output{deltaC: make(chan string, 10)}
	done := make(chan error, 1)
	go func() { done <- o.Run(context.Background(), Input{Content: "x"}, out) }()
	var seen string
	for !strings.HasSuffix(seen, " second") {
		seen += eventually.Receive(t, out.deltaC, "the pending text to be flushed during the pause")
	}
	close(release)
	if err := eventually.Receive(t, done, "Run"); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != "first second third" {
		t.Fatalf("output %q", got)
	}
}

func TestOpenAISendsHistory(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) { streamOf(textChunk("ok"))(w, r) })
	o, _ := newTestOpenAI(t, f, 0, nil)
	done, failed := "done", "failed"
	hist := []task.Message{
		{Role: task.RoleUser, Content: "What is 2+2?"},
		{Role: task.RoleAssistant, Content: "4", Status: &done},
		{Role: task.RoleUser, Content: "And 3+3?"},
		{Role: task.RoleAssistant, Content: "partial", Status: &failed},
	}
	if err := o.Run(context.Background(), Input{Content: "And 5+5?", History: hist}, &output{}); err != nil {
		t.Fatal(err)
	}
	want := []chatMessage{{"system", "You are terse."}, {"user", "What is 2+2?"}, {"assistant", "4"}, {"user", "And 5+5?"}}
	if got := f.bodies[0].Messages; !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
}

func TestOpenAICancelClosesUpstreamRequest(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"before first token", "after first token"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			arrived, closed := make(chan struct{}), make(chan struct{})
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if when == "after first token" {
					startSSE(w)
					sse(w, roleChunk, textChunk("Hel"))
				}
				close(arrived)
				<-r.Context().Done() // only the client going away ends this
				close(closed)
			})
			o, _ := newTestOpenAI(t, f, 3, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &output{}
			done := make(chan error, 1)
			go func() { done <- o.Run(ctx, Input{Content: "x"}, out) }()
			eventually.Receive(t, arrived, "the request")
			cancel()
			err := eventually.Receive(t, done, "Run to return after cancel")
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if _, ok := AsFailure(err); ok {
				t.Fatalf("a cancel became a Failure: %v", err)
			}
			eventually.Receive(t, closed, "the server to see the request closed")
			if n := f.requests.Load(); n != 1 {
				t.Fatalf("%d requests: a cancel must not retry", n)
			}
		})
	}
}

func TestOpenAIOutputErrorStopsTheRun(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, textChunk("one"))
		<-r.Context().Done()
		close(closed)
	})
	o, _ := newTestOpenAI(t, f, 3, nil)
	fenced := errors.New("fenced")
	out := &output{onDelta: func(int) error { return fenced }}
	err := o.Run(context.Background(), Input{Content: "x"}, out)
	if !errors.Is(err, fenced) {
		t.Fatalf("err = %v, want the Output's error", err)
	}
	if _, ok := AsFailure(err); ok {
		t.Fatalf("an Output error became a Failure")
	}
	eventually.Receive(t, closed, "the upstream request to be closed")
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}
