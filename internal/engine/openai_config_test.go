package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

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

func TestOpen(t *testing.T) {
	t.Parallel()
	e, err := Open("openai", Config{OpenAI: OpenAIConfig{Model: "llama3.2", BaseURL: "http://127.0.0.1:11434/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := e.(*OpenAI); !ok || o.Config().Model != "llama3.2" || o.endpoint != "http://127.0.0.1:11434/v1/chat/completions" ||
		o.Config().Logger == nil {
		t.Fatalf("Open(openai) = %#v", e)
	}
	if _, err := Open("openai", Config{}); err == nil || !strings.Contains(err.Error(), "model is required") {
		t.Fatalf("no model: %v", err)
	}
	for _, name := range []string{"", "demo"} {
		if e, err := Open(name, Config{}); err != nil {
			t.Fatal(err)
		} else if _, ok := e.(*Demo); !ok {
			t.Fatalf("Open(%q) = %T", name, e)
		}
	}
	if _, err := Open("gpt-9", Config{}); err == nil || !strings.Contains(err.Error(), "demo, openai") {
		t.Fatalf("unknown: %v", err)
	}
}
