package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestOpenAIConfigDefaults(t *testing.T) {
	t.Parallel()
	o, err := NewOpenAI(OpenAIConfig{Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config()
	if c.BaseURL != "https://api.openai.com/v1" || c.ContextBudget != 6000 ||
		c.RequestTimeout != 10*time.Minute || c.FirstTokenTimeout != time.Minute ||
		c.ConnectRetry != 30*time.Second || c.HTTPClient == nil || c.Logger == nil {
		t.Fatalf("defaults %+v", c)
	}
	if o.endpoint != "https://api.openai.com/v1/chat/completions" {
		t.Fatalf("endpoint %s", o.endpoint)
	}
	o, err = NewOpenAI(OpenAIConfig{Model: "m", BaseURL: " http://127.0.0.1:11434/v1/ "})
	if err != nil || o.endpoint != "http://127.0.0.1:11434/v1/chat/completions" {
		t.Fatalf("trailing slash: %v %v", o, err)
	}
}

func TestOpenAIConfigInvalid(t *testing.T) {
	t.Parallel()
	hot, nan := 2.5, 0.0
	nan = nan / nan
	for name, c := range map[string]OpenAIConfig{
		"no model":         {},
		"blank model":      {Model: "  "},
		"not a URL":        {Model: "m", BaseURL: "127.0.0.1:11434/v1"},
		"ftp":              {Model: "m", BaseURL: "ftp://h/v1"},
		"query":            {Model: "m", BaseURL: "http://h/v1?x=1"},
		"hot":              {Model: "m", Temperature: &hot},
		"nan":              {Model: "m", Temperature: &nan},
		"negative max":     {Model: "m", MaxTokens: -1},
		"negative timeout": {Model: "m", FirstTokenTimeout: -time.Second},
		"key with newline": {Model: "m", APIKey: "sk-1\r\nX-Evil: 1"},
	} {
		if _, err := NewOpenAI(c); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "sk-1") {
			t.Errorf("%s: error %q shows the key", name, err)
		}
	}
}

func TestOpenAIConfigFromEnv(t *testing.T) {
	t.Parallel()
	c, err := OpenAIConfigFromEnv(envOf(map[string]string{
		"TETHER_OPENAI_BASE_URL":            "http://127.0.0.1:8000/v1",
		"TETHER_OPENAI_API_KEY":             testKey,
		"TETHER_OPENAI_MODEL":               " llama3.2 ",
		"TETHER_OPENAI_SYSTEM_PROMPT":       "Be brief.",
		"TETHER_OPENAI_TEMPERATURE":         "0.7",
		"TETHER_OPENAI_MAX_TOKENS":          "512",
		"TETHER_OPENAI_CONTEXT_BUDGET":      "2000",
		"TETHER_OPENAI_TIMEOUT":             "2m",
		"TETHER_OPENAI_FIRST_TOKEN_TIMEOUT": "3m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL != "http://127.0.0.1:8000/v1" || c.APIKey != testKey || c.Model != "llama3.2" ||
		c.SystemPrompt != "Be brief." || c.Temperature == nil || *c.Temperature != 0.7 ||
		c.MaxTokens != 512 || c.ContextBudget != 2000 || c.RequestTimeout != 2*time.Minute ||
		c.FirstTokenTimeout != 3*time.Minute {
		t.Fatalf("config %+v", c)
	}

	_, err = OpenAIConfigFromEnv(envOf(map[string]string{
		"TETHER_OPENAI_API_KEY":     testKey,
		"TETHER_OPENAI_TEMPERATURE": "warm",
		"TETHER_OPENAI_MAX_TOKENS":  "many",
		"TETHER_OPENAI_TIMEOUT":     "-1s",
	}))
	for _, want := range []string{"TETHER_OPENAI_MODEL is required", "TETHER_OPENAI_TEMPERATURE", "TETHER_OPENAI_MAX_TOKENS", "TETHER_OPENAI_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v lacks %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Errorf("err shows the key")
	}
}

// Every variable the loader reads is in the settings table of
// docs/engines.md, so a new setting cannot go undocumented.
func TestOpenAISettingsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/engines.md")
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	_, _ = OpenAIConfigFromEnv(func(name string) string {
		read = append(read, name)
		return ""
	})
	if len(read) < 10 {
		t.Fatalf("the loader read only %v", read)
	}
	for _, name := range read {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("%s is not in the settings table of docs/engines.md", name)
		}
	}
}

func TestOpenAIConfigNeverPrintsTheKey(t *testing.T) {
	t.Parallel()
	c := OpenAIConfig{Model: "m", APIKey: testKey}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), c.String(), logs.String()} {
		if strings.Contains(s, testKey) {
			t.Fatalf("key shown in %q", s)
		}
	}
	if !strings.Contains(logs.String(), `"api_key":"set"`) {
		t.Fatalf("log %s", logs.String())
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	e, err := FromEnv("openai", envOf(map[string]string{"TETHER_OPENAI_MODEL": "llama3.2",
		"TETHER_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := e.(*OpenAI); !ok || o.Config().Model != "llama3.2" || o.endpoint != "http://127.0.0.1:11434/v1/chat/completions" {
		t.Fatalf("FromEnv(openai) = %#v", e)
	}
	if _, err := FromEnv("openai", envOf(nil), nil); err == nil || !strings.Contains(err.Error(), "TETHER_OPENAI_MODEL") {
		t.Fatalf("no model: %v", err)
	}
	for _, name := range []string{"", "demo"} {
		if e, err := FromEnv(name, envOf(nil), nil); err != nil {
			t.Fatal(err)
		} else if _, ok := e.(*Demo); !ok {
			t.Fatalf("FromEnv(%q) = %T", name, e)
		}
	}
	if _, err := FromEnv("gpt-9", envOf(nil), nil); err == nil || !strings.Contains(err.Error(), "demo, openai") {
		t.Fatalf("unknown: %v", err)
	}
}
