package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of OpenAIConfig.
const (
	DefaultOpenAIBaseURL       = "https://api.openai.com/v1"
	DefaultContextBudget       = 6000
	DefaultRequestTimeout      = 10 * time.Minute
	DefaultFirstTokenTimeout   = 60 * time.Second
	DefaultConnectRetry        = 30 * time.Second
	openAIRetryInitialInterval = 500 * time.Millisecond
	openAIRetryMaxInterval     = 5 * time.Second
)

// OpenAIConfig configures the OpenAI-compatible engine. Its zero value (with
// a Model) talks to api.openai.com; NewOpenAI fills the defaults and checks
// the values once. The runner's settings for it (TETHER_OPENAI_*) are
// declared in internal/config with the defaults above.
type OpenAIConfig struct {
	// BaseURL is the API root that /chat/completions is appended to, for
	// example http://127.0.0.1:11434/v1 (Ollama) or https://api.openai.com/v1.
	BaseURL string
	// APIKey is sent as a bearer token when set. It never appears in an
	// error, a log line or the String of this config.
	APIKey string
	// Model is the model name the server knows (required).
	Model string
	// SystemPrompt, when set, is sent as the first message; a task's own
	// instructions (Input.Instructions) follow it in the same message.
	SystemPrompt string
	// Temperature is sent when not nil (0..2), unless the task names its own.
	Temperature *float64
	// MaxTokens caps the answer's length when > 0 and makes progress a
	// real fraction of that cap; a task may ask for less, never for more.
	MaxTokens int
	// ContextBudget is how many tokens (estimated, see estimateTokens) of
	// earlier messages are sent; 0 means DefaultContextBudget and a
	// negative value sends no history.
	ContextBudget int
	// HTTPClient sends the requests; nil means a client with no timeout of
	// its own (the timeouts below apply through the request's context).
	HTTPClient *http.Client
	// RequestTimeout caps a whole answer, retries included.
	RequestTimeout time.Duration
	// FirstTokenTimeout caps the wait for the first generated token of one
	// request, so a server that accepts a request and then hangs fails
	// within a minute instead of at RequestTimeout.
	FirstTokenTimeout time.Duration
	// ConnectRetry bounds the time spent retrying connection failures, 429
	// and 5xx before the first token.
	ConnectRetry time.Duration
	// Continue says how an answer kept from a lost runner is carried on:
	// ContinuePrefill ("" means it) or ContinueRestart.
	Continue ContinueMode
	// Logger receives upstream error detail (never the key); nil means
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c OpenAIConfig) withDefaults() OpenAIConfig {
	c.BaseURL = strings.TrimRight(cmp.Or(strings.TrimSpace(c.BaseURL), DefaultOpenAIBaseURL), "/")
	c.ContextBudget = cmp.Or(c.ContextBudget, DefaultContextBudget)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.FirstTokenTimeout = cmp.Or(c.FirstTokenTimeout, DefaultFirstTokenTimeout)
	c.ConnectRetry = cmp.Or(c.ConnectRetry, DefaultConnectRetry)
	c.Continue = cmp.Or(c.Continue, ContinuePrefill)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks a config with its defaults filled.
func (c OpenAIConfig) validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q: want http(s)://host[:port]/path", c.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base URL %q: no query or fragment allowed", c.BaseURL)
	}
	var errs []error
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("model is required"))
	}
	if t := c.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		errs = append(errs, fmt.Errorf("temperature %v: want 0..2", *t))
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max tokens %d: want >= 0", c.MaxTokens))
	}
	if c.RequestTimeout < 0 || c.FirstTokenTimeout < 0 || c.ConnectRetry < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	if c.Continue != ContinuePrefill && c.Continue != ContinueRestart {
		errs = append(errs, fmt.Errorf("continue mode %q: want %s or %s", c.Continue, ContinuePrefill, ContinueRestart))
	}
	// A key with a line break would be a header injection, not a key.
	if strings.ContainsAny(c.APIKey, "\r\n") {
		errs = append(errs, errors.New("API key contains a line break"))
	}
	return errors.Join(errs...)
}

// String describes c without the key, so a config printed with %v or %+v
// cannot leak it.
func (c OpenAIConfig) String() string {
	return fmt.Sprintf("openai{base_url=%s model=%s key=%s max_tokens=%d context_budget=%d continue=%s}",
		c.BaseURL, c.Model, redactedKey(c.APIKey), c.MaxTokens, c.ContextBudget, c.Continue)
}

// LogValue implements slog.LogValuer, again without the key.
func (c OpenAIConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("model", c.Model),
		slog.String("api_key", redactedKey(c.APIKey)),
		slog.Int("max_tokens", c.MaxTokens),
		slog.Int("context_budget", c.ContextBudget),
		slog.String("continue", string(c.Continue)),
	)
}

func redactedKey(k string) string {
	if k == "" {
		return "unset"
	}
	return "set"
}
