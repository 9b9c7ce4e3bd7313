package compat_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/gateway"
)

// These tests drive the official openai-go client (PROTOCOL.md section 11)
// against a real gateway, runner, Postgres and NATS.

// event is what a test keeps of a Responses stream event.
type event struct {
	typ   string
	seq   int64
	delta string
	text  string
	resp  responses.Response
}

// readAll reads a stream to its end (or until stop says so after an event).
func readAll(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
	Close() error
}, stop func([]event) bool) []event {
	t.Helper()
	defer s.Close()
	var out []event
	for s.Next() {
		c := s.Current()
		out = append(out, event{typ: c.Type, seq: c.SequenceNumber, delta: c.Delta, text: c.Text, resp: c.Response})
		if stop != nil && stop(out) {
			return out
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return out
}

// checkNumbering holds a whole stream to section 11.1: the four opening
// events, each delta numbered 3 + the answer's byte length at its end, the
// four closing events numbered on, and the text exact.
func checkNumbering(t *testing.T, evs []event, want string) {
	t.Helper()
	opening := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if len(evs) < 8 {
		t.Fatalf("%d events; want at least 8", len(evs))
	}
	for i, typ := range opening {
		if evs[i].typ != typ || evs[i].seq != int64(i) {
			t.Fatalf("event %d is %s #%d; want %s #%d", i, evs[i].typ, evs[i].seq, typ, i)
		}
	}
	var text strings.Builder
	i := 4
	for ; i < len(evs) && evs[i].typ == "response.output_text.delta"; i++ {
		text.WriteString(evs[i].delta)
		if want := int64(3 + text.Len()); evs[i].seq != want {
			t.Fatalf("delta ending at byte %d is #%d; want #%d", text.Len(), evs[i].seq, want)
		}
	}
	if text.String() != want {
		t.Fatalf("deltas join to %q; want %q", text.String(), want)
	}
	end := int64(3 + len(want))
	closing := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if len(evs)-i != len(closing) {
		t.Fatalf("%d events after the deltas; want %d", len(evs)-i, len(closing))
	}
	for k, typ := range closing {
		if e := evs[i+k]; e.typ != typ || e.seq != end+int64(k)+1 {
			t.Fatalf("closing event %d is %s #%d; want %s #%d", k, e.typ, e.seq, typ, end+int64(k)+1)
		}
	}
	if got := evs[i].text; got != want {
		t.Fatalf("output_text.done text %q; want %q", got, want)
	}
	if r := evs[len(evs)-1].resp; r.Status != "completed" || r.OutputText() != want {
		t.Fatalf("completed response: status %q, output %q", r.Status, r.OutputText())
	}
}

func TestResponsesLiveStreamNumbering(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-live")
	s := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 40 2")}})
	evs := readAll(t, s, nil)
	checkNumbering(t, evs, enginetest.StreamText(40))

	// The same response replayed from 0 by the SDK's GetStreaming (which
	// sends stream in a JSON body) agrees event for event, deltas included.
	id := evs[0].resp.ID
	replay := readAll(t, c.Responses.GetStreaming(context.Background(), id, responses.ResponseGetParams{}), nil)
	checkNumbering(t, replay, enginetest.StreamText(40))
	if len(replay) != len(evs) {
		t.Fatalf("replay has %d events, the live stream %d", len(replay), len(evs))
	}
	for i := range evs {
		if replay[i].typ != evs[i].typ || replay[i].seq != evs[i].seq || replay[i].delta != evs[i].delta {
			t.Fatalf("event %d: replay %s #%d %q, live %s #%d %q", i, replay[i].typ, replay[i].seq, replay[i].delta,
				evs[i].typ, evs[i].seq, evs[i].delta)
		}
	}
}

// TestResponsesResumeAtRandomCuts cuts a stream at random points (the first
// four events included), while the answer runs and after it ended, and
// resumes with starting_after: the events after the cut carry the numbers
// of the live stream and the text joins exactly.
func TestResponsesResumeAtRandomCuts(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-cuts")
	ctx := context.Background()
	const n = 60
	want := enginetest.StreamText(n)
	end := int64(3 + len(want))
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := 0
	for round := 0; round < 4; round++ {
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openai.Bool(true),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 60 4")}})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		for k := 0; k < 8; k++ {
			// Read a live stream up to a random number of events, cut it,
			// and resume after the last event it gave.
			stopAt := 1 + rng.IntN(6)
			if k%2 == 1 {
				stopAt = 1 + rng.IntN(40)
			}
			before := readAll(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}),
				func(evs []event) bool { return len(evs) >= stopAt })
			last := before[len(before)-1].seq
			var text strings.Builder
			for _, ev := range before {
				text.WriteString(ev.delta)
			}
			after := readAll(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{StartingAfter: openai.Int(last)}), nil)
			prev := last
			for _, ev := range after {
				if ev.seq <= prev {
					t.Fatalf("cut after #%d: event %s #%d does not follow #%d", last, ev.typ, ev.seq, prev)
				}
				prev = ev.seq
				if ev.typ == "response.output_text.delta" {
					text.WriteString(ev.delta)
					if ev.seq != int64(3+text.Len()) {
						t.Fatalf("cut after #%d: delta ending at byte %d is #%d", last, text.Len(), ev.seq)
					}
				}
			}
			if text.String() != want {
				for _, ev := range after {
					t.Logf("after: %s #%d %q", ev.typ, ev.seq, ev.delta)
				}
				t.Fatalf("cut after #%d: text %q; want %q", last, text.String(), want)
			}
			if len(after) > 0 && after[len(after)-1].seq != end+4 {
				t.Fatalf("cut after #%d: last event #%d; want #%d", last, after[len(after)-1].seq, end+4)
			}
			cuts++
		}
	}
	// Resumes from every number of a finished response.
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 5 0")}})
	if err != nil || r.Status != "completed" {
		t.Fatalf("create and wait: %v, %+v", err, r)
	}
	short := enginetest.StreamText(5)
	for after := int64(-1); after <= int64(3+len(short)+4); after++ {
		evs := readAll(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{StartingAfter: openai.Int(after)}), nil)
		var text strings.Builder
		for _, ev := range evs {
			if ev.seq <= after {
				t.Fatalf("starting_after %d sent #%d", after, ev.seq)
			}
			text.WriteString(ev.delta)
		}
		from := min(max(0, int(after-3)), len(short))
		if text.String() != short[from:] {
			t.Fatalf("starting_after %d: deltas %q; want %q", after, text.String(), short[from:])
		}
		cuts++
	}
	t.Logf("FIGURES resume cuts=%d all exact", cuts)
}

// apiStatus is the HTTP status of an error from the SDK, 0 for another error.
func apiStatus(err error) int {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

func TestResponsesIdempotencyCancelAndForeignIDs(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-owner")
	ctx := context.Background()
	key := option.WithHeader("Idempotency-Key", "retry-"+uuid.NewString())
	body := responses.ResponseNewParams{Model: "demo", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 400 20")}}
	before := e.tasks()
	a, err := c.Responses.New(ctx, body, key)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	b, err := c.Responses.New(ctx, body, key)
	if err != nil {
		t.Fatalf("create again: %v", err)
	}
	if a.ID != b.ID || e.tasks() != before+1 {
		t.Fatalf("two creates with one key: ids %s and %s, %d tasks made", a.ID, b.ID, e.tasks()-before)
	}
	other := body
	other.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 3 0")}
	if _, err := c.Responses.New(ctx, other, key); apiStatus(err) != http.StatusConflict {
		t.Fatalf("the key with another body: %v; want 409", err)
	}
	if e.tasks() != before+1 {
		t.Fatalf("a refused create made a task")
	}

	// Cancel is idempotent.
	x, err := c.Responses.Cancel(ctx, a.ID)
	if err != nil || x.Status != "cancelled" {
		t.Fatalf("cancel: %v, status %q", err, x.Status)
	}
	y, err := c.Responses.Cancel(ctx, a.ID)
	if err != nil || y.Status != "cancelled" || y.OutputText() != x.OutputText() {
		t.Fatalf("cancel again: %v, status %q", err, y.Status)
	}
	done, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 3 0")}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if z, err := c.Responses.Cancel(ctx, done.ID); err != nil || z.Status != "completed" || z.OutputText() != enginetest.StreamText(3) {
		t.Fatalf("cancel of a finished response: %v, %q %q", err, z.Status, z.OutputText())
	}

	// Another key is another user: its ids do not exist for this one.
	stranger := e.client("key-stranger")
	for _, id := range []string{a.ID, uuid.NewString(), "resp_not_a_uuid"} {
		if _, err := stranger.Responses.Get(ctx, id, responses.ResponseGetParams{}); apiStatus(err) != http.StatusNotFound {
			t.Fatalf("get %s as another user: %v; want 404", id, err)
		}
		if _, err := stranger.Responses.Cancel(ctx, id); apiStatus(err) != http.StatusNotFound {
			t.Fatalf("cancel %s as another user: %v; want 404", id, err)
		}
	}
}

func TestResponsesConversationsJoin(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-conv")
	ctx := context.Background()
	first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Instructions: openai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	second, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 2 0")}})
	if err != nil {
		t.Fatalf("create after it: %v", err)
	}
	if first.Conversation.ID == "" || second.Conversation.ID != first.Conversation.ID {
		t.Fatalf("conversations %q and %q; want one", first.Conversation.ID, second.Conversation.ID)
	}
	if second.PreviousResponseID != first.ID || first.Instructions.OfString != "be brief" {
		t.Fatalf("echo: previous %q, instructions %+v", second.PreviousResponseID, first.Instructions)
	}
	third, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(first.Conversation.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("/stream 1 0")}})
	if err != nil || third.Conversation.ID != first.Conversation.ID {
		t.Fatalf("create in the conversation: %v, %q", err, third.Conversation.ID)
	}
	var turns int
	if err := e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM tasks WHERE conversation_id = $1`, first.Conversation.ID).Scan(&turns); err != nil || turns != 3 {
		t.Fatalf("tasks in the conversation: %d, %v", turns, err)
	}
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openai.String(uuid.NewString()),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}}); apiStatus(err) != http.StatusNotFound {
		t.Fatalf("previous_response_id of nothing: %v; want 404", err)
	}
}

func TestResponsesBadInputCreatesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-bad")
	ctx := context.Background()
	image := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
		responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto),
	}, responses.EasyInputMessageRoleUser)}
	cases := []struct {
		name   string
		body   responses.ResponseNewParams
		status int
		param  string
	}{
		{"store false", responses.ResponseNewParams{Model: "demo", Store: openai.Bool(false),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, 400, "store"},
		{"an image part", responses.ResponseNewParams{Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: image}}, 400, "input[0].content[0].type"},
		{"content over 32 KiB", responses.ResponseNewParams{Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("x", 32769))}}, 413, "input"},
		{"no input", responses.ResponseNewParams{Model: "demo"}, 400, "input"},
	}
	for _, tc := range cases {
		_, err := c.Responses.New(ctx, tc.body)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Param != tc.param || apiErr.Message == "" {
			t.Errorf("%s: %v; want %d naming %q", tc.name, err, tc.status, tc.param)
		}
	}
	if n := e.tasks(); n != 0 {
		t.Fatalf("%d tasks made by refused requests", n)
	}
}

// TestChatCompletionRepostedWithTheSameKey is the SDK's own retry: a
// stream cut mid-answer and posted again with its Idempotency-Key streams
// the same completion from its start, and one task ran.
func TestChatCompletionRepostedWithTheSameKey(t *testing.T) {
	t.Parallel()
	e := setup(t, gateway.Config{})
	c := e.client("key-chat")
	key := option.WithHeader("Idempotency-Key", "chat-"+uuid.NewString())
	body := openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("you are terse"), openai.UserMessage("/stream 80 5")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}

	ctx, cut := context.WithCancel(context.Background())
	s := c.Chat.Completions.NewStreaming(ctx, body, key)
	var first strings.Builder
	for s.Next() {
		first.WriteString(s.Current().Choices[0].Delta.Content)
		if strings.Count(first.String(), " ") >= 10 {
			break
		}
	}
	cut()
	_ = s.Close()

	s = c.Chat.Completions.NewStreaming(context.Background(), body, key)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != enginetest.StreamText(80) || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("reposted stream: %q (finish %q); want the whole answer", got, acc.Choices[0].FinishReason)
	}
	if acc.Usage.CompletionTokens == 0 || !strings.HasPrefix(acc.ID, "chatcmpl-") {
		t.Fatalf("usage %+v, id %q", acc.Usage, acc.ID)
	}
	if n := e.tasks(); n != 1 {
		t.Fatalf("%d tasks for one key; want 1", n)
	}

	// Not streamed: the completion once the task ended.
	done, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("/stream 4 0")}})
	if err != nil || done.Choices[0].Message.Content != enginetest.StreamText(4) {
		t.Fatalf("completion: %v, %+v", err, done)
	}
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.AssistantMessage("hi")}}); apiStatus(err) != http.StatusBadRequest {
		t.Fatalf("a last message that is not the user's: %v; want 400", err)
	}
}
