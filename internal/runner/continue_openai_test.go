package runner_test

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
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// prefillModel is a stand-in for a model server (outside our system) that
// speaks the streaming chat completions API and supports prefill the way
// vLLM does: given a trailing assistant message and continue_final_message,
// it continues that message instead of starting a new one. Its answer is
// deterministic, "w1 w2 … wN ", so a test can check the text exactly, and it
// counts every word it streams.
type prefillModel struct {
	words int
	gap   time.Duration

	mu       sync.Mutex
	streamed int
	prefixes []string
}

func (m *prefillModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Continue bool `json:"continue_final_message"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	prefix := ""
	if last := body.Messages[len(body.Messages)-1]; last.Role == "assistant" && body.Continue {
		prefix = last.Content
	}
	m.mu.Lock()
	m.prefixes = append(m.prefixes, prefix)
	m.mu.Unlock()
	from := strings.Count(prefix, " ") // whole words already written
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	for i := from + 1; i <= m.words; i++ {
		chunk, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{
			"index": 0, "delta": map[string]string{"content": fmt.Sprintf("w%d ", i)}}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil {
			return
		}
		flusher.Flush()
		m.mu.Lock()
		m.streamed++
		m.mu.Unlock()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(m.gap):
		}
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	flusher.Flush()
}

// A runner of the OpenAI-compatible engine lost mid-answer: the next
// attempt sends the kept text as a trailing assistant message, the model
// continues it, and the answer is exactly the one an uninterrupted run
// gives. The test reports how many words the model streamed beyond the
// answer's own (those the lost runner had received but the log had not).
func TestOpenAIAnswerIsContinuedByPrefill(t *testing.T) {
	t.Parallel()
	model := &prefillModel{words: 200, gap: 10 * time.Millisecond}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	newEngine := func() engine.Engine {
		o, err := engine.NewOpenAI(engine.OpenAIConfig{BaseURL: srv.URL, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	e := setup(t)
	tk := e.submit("tell me")
	handed := e.loseRunner(tk, runner.Config{ID: "lost", Engine: newEngine()}, 5)
	if handed.Keep == 0 || !strings.HasPrefix(handed.Output, "w1 w2 ") {
		t.Fatalf("handed over keeping %q", handed.Output)
	}
	e.startRunner(runner.Config{ID: "next", Engine: newEngine()}, nil)
	done := e.waitStatus(tk.ID, task.StatusDone)
	e.checkLog(e.log(tk.ID), done)

	var want strings.Builder
	for i := 1; i <= model.words; i++ {
		fmt.Fprintf(&want, "w%d ", i)
	}
	if done.Output != want.String() || done.Attempt != 2 {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.prefixes) != 2 || model.prefixes[0] != "" || model.prefixes[1] != handed.Output {
		t.Fatalf("requests continued %q, want a first request and one continuing the kept %d bytes",
			model.prefixes, handed.Keep)
	}
	t.Logf("model streamed %d words for a %d-word answer (%d streamed twice: received by the lost runner, not yet in the log)",
		model.streamed, model.words, model.streamed-model.words)
}
