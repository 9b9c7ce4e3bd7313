package task

// Preamble is what a request of an API that apps already use (PROTOCOL.md
// section 11: OpenAI Responses, Chat Completions, the AI SDK's UI message
// stream) carries besides its content: the model it named, its
// instructions, the items before its last user item, its metadata. It is
// kept with the task (a task made over Tether's own protocol has none), so
// that the engine gets the same context on every attempt, a repeated request
// can be told from another one with the same Idempotency-Key, and a later
// GET of the response echoes what was asked.
type Preamble struct {
	// API names the endpoint that made the task: "responses",
	// "chat.completions" or "ui".
	API string `json:"api"`
	// Model is echoed back; the runner's engine answers whatever it names.
	Model string `json:"model,omitempty"`
	// Instructions are a system prompt for this task alone.
	Instructions string `json:"instructions,omitempty"`
	// Items are the messages of the request before its last user item,
	// oldest first: the engine's context before the conversation's own
	// history is (or, for a conversation the server does not have yet, in
	// place of it).
	Items []PreambleItem `json:"items,omitempty"`
	// Metadata is the request's metadata, echoed back.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Background is the Responses API's background flag, echoed back.
	Background bool `json:"background,omitempty"`
	// PreviousResponseID is the Responses API's previous_response_id,
	// echoed back.
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	// Options are sampling fields the engine may use where it can
	// (temperature, top_p, max_output_tokens, ...), by their API names.
	Options map[string]float64 `json:"options,omitempty"`
}

// PreambleItem is one earlier message of a request.
type PreambleItem struct {
	// Role is user, assistant, system or developer.
	Role string `json:"role"`
	Text string `json:"text"`
}

// Limits of a preamble, which the store checks (PROTOCOL.md section 9: a
// clear error, never a crash): a request's earlier items are a model's
// context, and a context far beyond any model's window is a mistake or an
// attack, not a conversation.
const (
	// MaxPreambleItems bounds Items (invalid beyond).
	MaxPreambleItems = 200
	// MaxPreambleBytes bounds the preamble's JSON, as the store encodes it
	// (too_large beyond).
	MaxPreambleBytes = 256 << 10
)

// The roles of a PreambleItem. User and assistant items are turns of the
// conversation; system and developer items are instructions, which an
// engine is given after the preamble's own Instructions.
const (
	ItemUser      = "user"
	ItemAssistant = "assistant"
	ItemSystem    = "system"
	ItemDeveloper = "developer"
)
