// Package engine holds the engines a runner can run: the deterministic demo
// engine of PROTOCOL.md section 6 and an OpenAI-compatible one. An
// engine knows nothing of seq numbers, NATS or Postgres: it writes text and
// progress to an Output and returns; the runner turns that into events.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/task"
)

// Engine produces the assistant's answer to one task attempt.
//
// Run returns nil when the answer is complete (the task becomes done), an
// error wrapping *Failure when the engine itself failed (the task becomes
// failed with Failure.Message), and any other error when it was stopped:
// once ctx is cancelled the runner alone decides whether that means
// cancelled or handed back, so Run only has to return promptly.
type Engine interface {
	Run(ctx context.Context, in Input, out Output) error
}

// Input is what an engine answers.
type Input struct {
	TaskID  string
	Content string
	// Instructions are a system prompt for this task alone (from its
	// preamble), for engines that send one to a model; they follow the
	// engine's own configured prompt. The demo engine ignores them.
	Instructions string
	// History holds the earlier messages of the conversation, oldest first,
	// for engines that send context to a model. The demo engine ignores it.
	// A task made by an API that apps already use has the earlier items of
	// its request first (they have no ID), then the conversation's own.
	History []task.Message
	// Options are the sampling fields of the task's request by their API
	// names (temperature, top_p, max_output_tokens or max_tokens,
	// presence_penalty, frequency_penalty, seed). An engine uses those it
	// can and ignores the rest; the demo engine ignores them all.
	Options map[string]float64
	// Prefix is the answer so far, kept from an attempt whose runner was
	// lost (PROTOCOL.md section 3, keep). The engine continues after it and
	// never writes it again: its first Delta follows the prefix directly.
	// Empty for a first attempt and for a retry, which start over.
	Prefix string
	// Attachments are the files of the task's own message (Own) and of the
	// earlier messages in History, oldest first (PROTOCOL.md section 10):
	// name, size, type, SHA-256, and the text of text files that the
	// runner's budget let it load. They come from the store, never from a
	// gateway's disk.
	Attachments []task.AttachmentFile
}

// ErrCannotContinue is returned (wrapped) by an engine that cannot continue a
// non-empty Input.Prefix (a model server without prefill, or an engine told
// to restart). It must be returned before anything is written; the runner
// then starts the attempt over with keep 0 and runs the engine again with
// an empty Prefix.
var ErrCannotContinue = errors.New("engine cannot continue a kept prefix")

// Output receives an engine's answer as it is produced. An error from either
// method means the runner can take no more (the attempt is being stopped):
// the engine returns it.
type Output interface {
	// Delta appends text to the answer.
	Delta(text string) error
	// Progress reports 0..100 and an optional stage. Engines call it only
	// when the value changes; the runner drops repeats anyway.
	Progress(percent int, stage string) error
}

// Failure is an engine's own failure. Message is short and shown to users as
// the task's error, so it must not carry internal detail.
type Failure struct {
	Message string
}

func (f *Failure) Error() string { return "engine failure: " + f.Message }

// AsFailure returns the *Failure in err's chain, if any.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// UsageRecorder is an Output that also keeps token usage. Engines that
// learn it from their model (the OpenAI engine, when the server reports it)
// call Usage once, when the answer is complete.
type UsageRecorder interface {
	Usage(promptTokens, completionTokens int)
}

// DefaultName is the engine used when none is configured.
const DefaultName = "demo"

// Config configures the engines: a plain struct that cmd/runner fills from
// internal/config, where every TETHER_OPENAI_* setting is declared. The demo
// engine reads none of it.
type Config struct {
	// OpenAI configures the openai engine (its Model is required).
	OpenAI OpenAIConfig
	// Logger receives the engines' own log lines; nil means slog.Default().
	Logger *slog.Logger
}

// constructors is the registry of engines by name.
var constructors = map[string]func(cfg Config) (Engine, error){
	"demo": func(Config) (Engine, error) { return NewDemo(), nil },
	"openai": func(cfg Config) (Engine, error) {
		oc := cfg.OpenAI
		oc.Logger = cmp.Or(oc.Logger, cfg.Logger)
		o, err := NewOpenAI(oc)
		if err != nil {
			return nil, err // not a typed nil *OpenAI in the interface
		}
		return o, nil
	},
}

// Names lists the known engine names, sorted.
func Names() []string {
	names := make([]string, 0, len(constructors))
	for n := range constructors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New returns the engine called name ("" means DefaultName) with a zero
// Config: the demo engine, or an openai engine that refuses to start
// without a model.
func New(name string) (Engine, error) {
	return Open(name, Config{})
}

// Open returns the engine called name ("" means DefaultName), configured by
// cfg.
func Open(name string, cfg Config) (Engine, error) {
	if name == "" {
		name = DefaultName
	}
	c, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	// The constructors' errors already name their engine.
	return c(cfg)
}
