package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

// TestOpenAISendsTheTasksInstructionsAndOptions: a task's instructions are
// the system message after the configured prompt, the items before its
// history come before the current message, and its sampling options reach
// the request where it has the field (a token cap only lowers the
// configured one; what no field takes is left out).
func TestOpenAISendsTheTasksInstructionsAndOptions(t *testing.T) {
	t.Parallel()
	moon := []task.Message{
		{Role: task.RoleUser, Content: "How far is the moon?"},
		{Role: task.RoleAssistant, Content: "About 384 400 km."},
	}
	temp := 0.3
	cases := []struct {
		name       string
		configured string
		maxTokens  int
		in         Input
		system     string         // "" for no system message
		want       map[string]any // sampling fields of the request
	}{
		{
			name: "configured prompt and every option", configured: "You are terse.", maxTokens: 100,
			in: Input{Instructions: "Use metric units.", Options: map[string]float64{
				"temperature": 0.9, "top_p": 0.5, "max_output_tokens": 50, "presence_penalty": 0.1,
				"frequency_penalty": -0.2, "seed": 7, "logit_bias_of_sorts": 3}},
			system: "You are terse.\n\nUse metric units.",
			want: map[string]any{"temperature": 0.9, "top_p": 0.5, "max_tokens": 50.0,
				"presence_penalty": 0.1, "frequency_penalty": -0.2, "seed": 7.0},
		},
		{
			name: "instructions alone, a cap above the configured one", maxTokens: 100,
			in:     Input{Instructions: "Use metric units.", Options: map[string]float64{"max_tokens": 500, "seed": 1.5}},
			system: "Use metric units.",
			want:   map[string]any{"temperature": 0.3, "max_tokens": 100.0},
		},
		{
			name: "no instructions, a cap where none is configured", configured: "You are terse.",
			in:     Input{Options: map[string]float64{"max_tokens": 64.5, "max_completion_tokens": 20}},
			system: "You are terse.",
			want:   map[string]any{"temperature": 0.3, "max_tokens": 20.0},
		},
		{
			name: "nothing of the task's", in: Input{},
			want: map[string]any{"temperature": 0.3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) { streamOf(textChunk("ok"))(w, r) })
			o, logs := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) {
				c.SystemPrompt, c.MaxTokens, c.Temperature = tc.configured, tc.maxTokens, &temp
			})
			in := tc.in
			in.TaskID, in.Content, in.History = "t1", "And the sun?", moon
			if err := o.Run(context.Background(), in, &output{}); err != nil {
				t.Fatalf("Run: %v\n%s", err, logs)
			}
			body, raw := f.request(t, 0)
			var want []chatMessage
			if tc.system != "" {
				want = append(want, chatMessage{"system", tc.system})
			}
			want = append(want, chatMessage{"user", "How far is the moon?"},
				chatMessage{"assistant", "About 384 400 km."}, chatMessage{"user", "And the sun?"})
			if !slices.Equal(body.Messages, want) {
				t.Fatalf("messages\n got %q\nwant %q", body.Messages, want)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for _, k := range []string{"temperature", "top_p", "max_tokens", "presence_penalty",
				"frequency_penalty", "seed", "logit_bias_of_sorts", "max_output_tokens", "max_completion_tokens"} {
				if v, ok := m[k]; ok {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("sampling fields\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}
