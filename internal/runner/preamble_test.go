package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// inputEngine answers "ok" and records the Input of each run.
type inputEngine struct{ seen chan engine.Input }

func (e inputEngine) Run(ctx context.Context, in engine.Input, out engine.Output) error {
	e.seen <- in
	return out.Delta("ok")
}

// preambleOf is what an OpenAI-style request with earlier items makes.
func preambleOf() *task.Preamble {
	return &task.Preamble{
		API:          "responses",
		Model:        "gpt-test",
		Instructions: "Be brief.",
		Items: []task.PreambleItem{
			{Role: "system", Text: "Speak French."},
			{Role: "user", Text: "q0"},
			{Role: "assistant", Text: "a0"},
			{Role: "developer", Text: "Use metric units."},
			{Role: "user", Text: "q1"},
		},
		Options: map[string]float64{"temperature": 0.5, "seed": 3},
	}
}

// submitWith submits content with preamble p in conv and dispatches it.
func (e *env) submitWith(conv, content string, p *task.Preamble) task.Task {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.store.Submit(ctx, task.SubmitRequest{UserID: user, TaskID: uuid.NewString(),
		ConversationID: conv, Content: content, Preamble: p})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	if err := e.bus.Dispatch(ctx, res.Task.ID, res.Task.Attempt); err != nil {
		e.t.Fatalf("dispatch: %v", err)
	}
	return res.Task
}

// TestEngineGetsThePreamble: a task's preamble reaches its engine: its
// instructions, then its system and developer items, as Instructions; its
// user and assistant items before the conversation's own history; its
// options as they are. A task without one gets none of it.
func TestEngineGetsThePreamble(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := inputEngine{seen: make(chan engine.Input, 4)}
	e.startRunner(runner.Config{Engine: rec}, nil)
	conv := uuid.NewString()

	first := e.submitWith(conv, "first question", nil)
	in := eventually.Receive(t, rec.seen, "the first run")
	if in.Instructions != "" || in.Options != nil || len(in.History) != 0 {
		t.Fatalf("a task without a preamble: %+v", in)
	}
	e.waitStatus(first.ID, task.StatusDone)

	second := e.submitWith(conv, "second question", preambleOf())
	in = eventually.Receive(t, rec.seen, "the second run")
	if want := "Be brief.\n\nSpeak French.\n\nUse metric units."; in.Instructions != want {
		t.Fatalf("instructions %q, want %q", in.Instructions, want)
	}
	var got []string
	for _, m := range in.History {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	want := []string{"user:q0", "assistant:a0", "user:q1", "user:first question", "assistant:ok"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if in.Content != "second question" || !reflect.DeepEqual(in.Options, preambleOf().Options) {
		t.Fatalf("content %q, options %v", in.Content, in.Options)
	}
	e.waitStatus(second.ID, task.StatusDone)
}

// TestOpenAIEngineGetsThePreamble: through the runner, the OpenAI engine's
// request to the model has the configured system prompt and the task's
// instructions in its system message, the preamble's exchange before the
// conversation's, and the task's temperature.
func TestOpenAIEngineGetsThePreamble(t *testing.T) {
	t.Parallel()
	bodies := make(chan []byte, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		bodies <- raw
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	o, err := engine.NewOpenAI(engine.OpenAIConfig{BaseURL: srv.URL, Model: "m", SystemPrompt: "You are Tether."})
	if err != nil {
		t.Fatal(err)
	}

	e := setup(t)
	e.startRunner(runner.Config{Engine: o}, nil)
	conv := uuid.NewString()
	first := e.submitWith(conv, "first question", nil)
	eventually.Receive(t, bodies, "the first request")
	e.waitStatus(first.ID, task.StatusDone)
	p := preambleOf()
	p.Items = p.Items[:3] // system, q0, a0
	second := e.submitWith(conv, "second question", p)
	raw := eventually.Receive(t, bodies, "the second request")
	e.waitStatus(second.ID, task.StatusDone)

	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Temperature *float64 `json:"temperature"`
		Seed        *int64   `json:"seed"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range body.Messages {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"system:You are Tether.\n\nBe brief.\n\nSpeak French.", "user:q0", "assistant:a0",
		"user:first question", "assistant:ok", "user:second question"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
	if body.Temperature == nil || *body.Temperature != 0.5 || body.Seed == nil || *body.Seed != 3 {
		t.Fatalf("request %s", raw)
	}
}
