package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine"
)

// fakeModel is an OpenAI-compatible chat completions server: it streams
// "w1 w2 … wN " as one chunk per word, paced so a tab can drop mid-answer,
// and records the messages of each request.
type fakeModel struct {
	words int

	mu       sync.Mutex
	requests [][]map[string]string
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []map[string]string `json:"messages"`
		Stream   bool                `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, body.Messages)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	flush := w.(http.Flusher).Flush
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n")
	for i := 1; i <= m.words; i++ {
		chunk, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": fmt.Sprintf("w%d ", i)}}}})
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Millisecond): // pacing only: the answer takes a while
		}
	}
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}

func words(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

// TestOpenAIEngineResumes: a runner on the openai engine, against a model
// server that speaks the streaming format, keeps every refresh guarantee: a
// tab that drops mid-answer re-attaches and ends with the exact text, and
// the next question carries the conversation so far.
func TestOpenAIEngineResumes(t *testing.T) {
	t.Parallel()
	model := &fakeModel{words: 120}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	eng, err := engine.NewOpenAI(engine.OpenAIConfig{BaseURL: ms.URL + "/v1", Model: "fake", APIKey: "sk-test", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(o *envOptions) { o.runner.Engine = eng })

	taskID, convID := newID(), newID()
	tb := e.dial("rae")
	f := &follower{taskID: taskID}
	f.apply(tb.submit(taskID, convID, "tell me a story"))
	for strings.Count(f.output(), " ") < 30 {
		f.apply(tb.next())
	}
	_ = tb.c.CloseNow()

	tb = e.dial("rae")
	f = &follower{taskID: taskID}
	f.apply(tb.call(map[string]any{"type": "subscribe", "task_id": taskID}))
	for !f.apply(tb.next()) {
	}
	if f.status != "done" || f.output() != words(120) || f.gaps+f.repeats != 0 {
		t.Fatalf("after re-attaching: status %s, %d gaps, %d repeats, output %q", f.status, f.gaps, f.repeats, f.output())
	}

	second := newID()
	f = &follower{taskID: second}
	f.apply(tb.submit(second, convID, "and then?"))
	for !f.apply(tb.next()) {
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	last := model.requests[len(model.requests)-1]
	if len(last) != 3 || last[0]["content"] != "tell me a story" || last[1]["content"] != words(120) || last[2]["content"] != "and then?" {
		t.Fatalf("the second request's messages: %v", last)
	}
}
