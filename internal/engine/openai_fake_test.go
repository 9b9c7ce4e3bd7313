package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tether-dev/tether/internal/syncbuffer"
)

// testKey is the API key of every test: no error or log line may contain it.
const testKey = "sk-test-SECRET-7f3a9c"

// The chunks below are what api.openai.com streams, field for field.

// roleChunk is the first chunk of every OpenAI stream: a role, no text.
const roleChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`

// contentChunk carries rawJSON, a JSON string literal, as delta.content.
func contentChunk(rawJSON string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":` +
		rawJSON + `},"logprobs":null,"finish_reason":null}],"usage":null}`
}

// textChunk carries s, encoded by encoding/json.
func textChunk(s string) string {
	b, _ := json.Marshal(s)
	return contentChunk(string(b))
}

func reasoningChunk(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":` +
		string(b) + `},"finish_reason":null}]}`
}

const finishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`

// usageChunk is the extra chunk of stream_options.include_usage.
func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		prompt, completion, prompt+completion)
}

// errorBody is OpenAI's error shape; it echoes the key, as a careless
// server might, to prove it is never passed on.
func errorBody(msg, typ string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg + " (key " + testKey + ")", "type": typ, "param": nil, "code": nil}})
	return string(b)
}

// sse writes events as data lines and flushes after each.
func sse(w http.ResponseWriter, events ...string) {
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// streamOf answers with a complete stream of events, as OpenAI does.
func streamOf(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, events...)
		sse(w, "[DONE]")
	}
}

// cut ends the response by closing the TCP connection mid-stream.
func cut(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

// fake is an in-test chat completions server.
type fake struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	bodies   []chatRequest
	raw      [][]byte
	headers  []http.Header
}

// newFake serves handler at /v1/chat/completions; the n-th request (from 1)
// is passed to handler with n, its body still readable.
func newFake(t *testing.T, handler func(n int, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		n := int(f.requests.Add(1))
		var body chatRequest
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body: %v", err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.raw = append(f.raw, raw)
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(raw))
		handler(n, w, r)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) baseURL() string { return f.srv.URL + "/v1" }

// request returns the i-th request (from 0) as decoded and as sent.
func (f *fake) request(t *testing.T, i int) (chatRequest, []byte) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.bodies) {
		t.Fatalf("request %d of %d", i, len(f.bodies))
	}
	return f.bodies[i], f.raw[i]
}

// refusingPrefill answers like a server that cannot continue an assistant
// message: status and an API error for a request that asks to continue one
// (continue_final_message, as vLLM reads it, or a trailing assistant
// message, as llama.cpp and Ollama do); any other request goes to next.
func refusingPrefill(status int, next func(n int, w http.ResponseWriter, r *http.Request)) func(n int, w http.ResponseWriter, r *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		var body chatRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		msgs := body.Messages
		if !body.ContinueFinalMessage && (len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant") {
			next(n, w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, errorBody("Assistant response prefill is incompatible with enable_thinking.", "invalid_request_error"))
	}
}

// newTestOpenAI returns an engine for f with a captured debug log and a
// retry policy of up to retries quick retries.
func newTestOpenAI(t *testing.T, f *fake, retries uint64, edit func(*OpenAIConfig)) (*OpenAI, *syncbuffer.Buffer) {
	t.Helper()
	logs := &syncbuffer.Buffer{}
	cfg := OpenAIConfig{
		BaseURL:      f.baseURL(),
		APIKey:       testKey,
		Model:        "test-model",
		SystemPrompt: "You are terse.",
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	o.newBackOff = func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), retries)
	}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testKey) {
			t.Errorf("the API key is in the log:\n%s", logs.String())
		}
	})
	return o, logs
}

// output is an engine.Output and UsageRecorder that keeps every call.
type output struct {
	mu       sync.Mutex
	deltas   []string
	progress []int
	stages   []string
	usage    [][2]int
	// onDelta, if set, runs after each delta with the count so far; its
	// error is returned to the engine.
	onDelta func(n int) error
	// deltaC, if set, receives each delta.
	deltaC chan string
}

func (o *output) Delta(text string) error {
	o.mu.Lock()
	o.deltas = append(o.deltas, text)
	n := len(o.deltas)
	o.mu.Unlock()
	if o.deltaC != nil {
		o.deltaC <- text
	}
	if o.onDelta != nil {
		return o.onDelta(n)
	}
	return nil
}

func (o *output) Progress(p int, stage string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.progress = append(o.progress, p)
	o.stages = append(o.stages, stage)
	return nil
}

func (o *output) Usage(prompt, completion int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.usage = append(o.usage, [2]int{prompt, completion})
}

func (o *output) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.deltas, "")
}

// checkProgress fails unless progress starts at 0 "connecting" and never
// decreases (the runner would drop a decrease, but the engine must not
// send one).
func (o *output) checkProgress(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.progress) == 0 || o.progress[0] != 0 || o.stages[0] != "connecting" {
		t.Fatalf("progress %v %v does not start at 0 connecting", o.progress, o.stages)
	}
	for i := 1; i < len(o.progress); i++ {
		if o.progress[i] <= o.progress[i-1] || o.progress[i] > 100 {
			t.Fatalf("progress %v is not strictly increasing within 0..100", o.progress)
		}
	}
}

var _ UsageRecorder = (*output)(nil)

// failureOf returns the Failure message of err, failing the test if err
// is not a Failure or leaks the key.
func failureOf(t *testing.T, err error) string {
	t.Helper()
	f, ok := AsFailure(err)
	if !ok {
		t.Fatalf("err = %v, want a *Failure", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("error %q contains the API key", err)
	}
	return f.Message
}
