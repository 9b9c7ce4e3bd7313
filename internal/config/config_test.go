package config

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	g, err := Load(Gateway, nil, getenv(map[string]string{"DATABASE_URL": "postgres://x"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Addr != ":8080" || g.MaxAttempts != 3 || g.Lease != 15*time.Second || g.Rate != 20 ||
		g.MaxTabsPerUser != 64 || g.ConnRate != 20 || g.IdleTimeout != 60*time.Second ||
		g.MaxSubscriptions != 256 || g.MaxPending != 64 || g.MaxRetries != 10 || g.NATSURL != "" {
		t.Fatalf("gateway defaults: %+v", g)
	}
	r, err := Load(Runner, nil, getenv(map[string]string{"DATABASE_URL": "postgres://x"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if r.NATSURL != "nats://127.0.0.1:4222" || r.Concurrency != 8 || r.Engine != "demo" || r.ResultInlineMax != 1<<20 {
		t.Fatalf("runner defaults: %+v", r)
	}
}

// A bad value stops the process naming the variable; a secret's value is
// never repeated.
func TestStrictTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Component
		env  map[string]string
		args []string
		want string
	}{
		{Gateway, map[string]string{"TETHER_MAX_ATTEMPTS": "3.9"}, nil, `TETHER_MAX_ATTEMPTS="3.9": want an integer`},
		{Runner, map[string]string{"TETHER_MAX_ATTEMPTS": "3.9"}, nil, `TETHER_MAX_ATTEMPTS="3.9": want an integer`},
		{Gateway, map[string]string{"TETHER_MAX_ATTEMPTS": "0"}, nil, "TETHER_MAX_ATTEMPTS"},
		{Gateway, map[string]string{"TETHER_RATE": "fast"}, nil, `TETHER_RATE="fast": want a number`},
		{Gateway, map[string]string{"TETHER_RATE": "-1"}, nil, "TETHER_RATE"},
		{Gateway, map[string]string{"TETHER_RATE": "NaN"}, nil, "TETHER_RATE"},
		{Runner, map[string]string{"TETHER_LEASE": "soon"}, nil, `TETHER_LEASE="soon": want a positive duration`},
		{Runner, map[string]string{"TETHER_LEASE": "-1s"}, nil, "TETHER_LEASE"},
		{Runner, map[string]string{"TETHER_RUNNER_CONCURRENCY": "0"}, nil, "TETHER_RUNNER_CONCURRENCY"},
		{Gateway, map[string]string{"TETHER_LOG_LEVEL": "loud"}, nil, "TETHER_LOG_LEVEL"},
		{Runner, map[string]string{"TETHER_MIGRATE": "maybe"}, nil, `TETHER_MIGRATE="maybe": want true or false`},
		{Gateway, map[string]string{"TETHER_MIGRATE_TIMEOUT": "0s"}, nil, "TETHER_MIGRATE_TIMEOUT"},
		{Gateway, map[string]string{"TETHER_TRUSTED_PROXIES": "10.0.0.0/8, nonsense"}, nil, "TETHER_TRUSTED_PROXIES"},
		{Gateway, map[string]string{"TETHER_AUTH_SECRET": "short-secret"}, nil, "TETHER_AUTH_SECRET=<hidden>: too short"},
		{Gateway, nil, []string{"-max-attempts", "2.5"}, "-max-attempts=\"2.5\" (TETHER_MAX_ATTEMPTS): want an integer"},
		{Gateway, nil, []string{"-auth-secret", "short-secret"}, "-auth-secret=<hidden> (TETHER_AUTH_SECRET): too short"},
		{Gateway, map[string]string{"TETHER_UPLOAD_S3_ENDPOINT": "http://127.0.0.1:9000"}, nil,
			"TETHER_UPLOAD_S3_ENDPOINT is set but TETHER_UPLOAD_S3_BUCKET is not"},
		{Gateway, map[string]string{"TETHER_UPLOAD_S3_BUCKET": "b", "TETHER_UPLOAD_S3_PATH_STYLE": "sometimes"}, nil,
			"TETHER_UPLOAD_S3_PATH_STYLE"},
	} {
		env := map[string]string{"DATABASE_URL": "postgres://x"}
		for k, v := range tc.env {
			env[k] = v
		}
		var stderr bytes.Buffer
		_, err := Load(tc.c, tc.args, getenv(env), &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err = %v, want %q", tc.env, tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error()+stderr.String(), "short-secret") {
			t.Errorf("the secret was repeated: %v", err)
		}
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	t.Parallel()
	c, err := Load(Gateway, []string{"-max-attempts", "5", "-trusted-proxies", "10.0.0.1,192.168.0.0/16"},
		getenv(map[string]string{"DATABASE_URL": "postgres://x", "TETHER_MAX_ATTEMPTS": "4"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxAttempts != 5 || len(c.TrustedProxies) != 2 || c.TrustedProxies[0].String() != "10.0.0.1/32" {
		t.Fatalf("%+v", c)
	}
}

// A boolean flag stands alone (-migrate) or takes a value (-migrate=false),
// and wins over its variable.
func TestBooleanFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  string
		args []string
		want bool
	}{
		{"", nil, true},
		{"false", nil, false},
		{"false", []string{"-migrate"}, true},
		{"true", []string{"-migrate=false"}, false},
	} {
		c, err := Load(Gateway, tc.args, getenv(map[string]string{"DATABASE_URL": "postgres://x", "TETHER_MIGRATE": tc.env}), &bytes.Buffer{})
		if err != nil || c.Migrate != tc.want {
			t.Errorf("TETHER_MIGRATE=%q %v: migrate %v, %v; want %v", tc.env, tc.args, c != nil && c.Migrate, err, tc.want)
		}
	}
}

func TestNeedsDatabaseURL(t *testing.T) {
	t.Parallel()
	_, err := Load(Runner, nil, getenv(nil), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "make run") {
		t.Fatalf("err = %v", err)
	}
}

func TestHelpNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	secret := "a-secret-of-at-least-thirty-two-bytes!!"
	_, err := Load(Gateway, []string{"-h"}, getenv(map[string]string{"DATABASE_URL": "postgres://u:pw@h/db",
		"TETHER_AUTH_SECRET": secret}), &stderr)
	if err == nil {
		t.Fatal("-h: no error")
	}
	out := stderr.String()
	if !strings.Contains(out, "-max-tabs-per-user") || strings.Contains(out, secret) || strings.Contains(out, "pw@") {
		t.Fatalf("-h output:\n%s", out)
	}
}

func TestDeriveKey(t *testing.T) {
	t.Parallel()
	a := DeriveKey([]byte("secret"), "cursor")
	if len(a) != 32 || bytes.Equal(a, DeriveKey([]byte("secret"), "other")) ||
		bytes.Equal(a, DeriveKey([]byte("secret2"), "cursor")) || !bytes.Equal(a, DeriveKey([]byte("secret"), "cursor")) {
		t.Fatal("derived keys are not independent per secret and label")
	}
}

// The README's configuration table is this package's declarations.
func TestReadmeTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- config table: made from internal/config/settings.go -->\n", "<!-- end of config table -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q ... %q section", begin, end)
	}
	if got, want := s[i+len(begin):j], Table(); got != want {
		t.Fatalf("README.md's configuration table differs from internal/config; replace it with:\n\n%s", want)
	}
}

// The openai engine's settings are read by this loader like every other:
// typed, each bad value named, the key never repeated, the model required
// only with that engine.
func TestOpenAISettings(t *testing.T) {
	t.Parallel()
	const key = "sk-test-SECRET-7f3a9c"
	c, err := Load(Runner, []string{"-openai-context-budget", "2000"}, getenv(map[string]string{
		"DATABASE_URL":                      "postgres://x",
		"TETHER_ENGINE":                     "openai",
		"TETHER_OPENAI_BASE_URL":            "http://127.0.0.1:8000/v1",
		"TETHER_OPENAI_API_KEY":             key,
		"TETHER_OPENAI_MODEL":               " llama3.2 ",
		"TETHER_OPENAI_SYSTEM_PROMPT":       "Be brief.",
		"TETHER_OPENAI_TEMPERATURE":         "0.7",
		"TETHER_OPENAI_MAX_TOKENS":          "512",
		"TETHER_OPENAI_CONTEXT_BUDGET":      "100",
		"TETHER_OPENAI_TIMEOUT":             "2m",
		"TETHER_OPENAI_FIRST_TOKEN_TIMEOUT": "3m",
		"TETHER_OPENAI_CONTINUE":            " Restart ",
	}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.OpenAIBaseURL != "http://127.0.0.1:8000/v1" || c.OpenAIAPIKey != key || c.OpenAIModel != "llama3.2" ||
		c.OpenAISystemPrompt != "Be brief." || c.OpenAITemperature == nil || *c.OpenAITemperature != 0.7 ||
		c.OpenAIMaxTokens != 512 || c.OpenAIContextBudget != 2000 || c.OpenAITimeout != 2*time.Minute ||
		c.OpenAIFirstTokenTimeout != 3*time.Minute || c.OpenAIContinue != "restart" {
		t.Fatalf("%+v", c)
	}

	d, err := Load(Runner, nil, getenv(map[string]string{"DATABASE_URL": "postgres://x"}), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("the demo engine needs no model: %v", err)
	}
	if d.OpenAITemperature != nil || d.OpenAIMaxTokens != 0 || d.OpenAIContextBudget != 6000 ||
		d.OpenAIBaseURL != "https://api.openai.com/v1" || d.OpenAIContinue != "prefill" || d.OpenAIFirstTokenTimeout != time.Minute {
		t.Fatalf("openai defaults: %+v", d)
	}
	if _, err := Load(Runner, nil, getenv(map[string]string{"DATABASE_URL": "postgres://x", "TETHER_ENGINE": "openai"}),
		&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "TETHER_OPENAI_MODEL") {
		t.Fatalf("openai without a model: %v", err)
	}

	_, err = Load(Runner, nil, getenv(map[string]string{
		"DATABASE_URL":              "postgres://x",
		"TETHER_OPENAI_API_KEY":     key,
		"TETHER_OPENAI_TEMPERATURE": "warm",
		"TETHER_OPENAI_MAX_TOKENS":  "many",
		"TETHER_OPENAI_TIMEOUT":     "-1s",
		"TETHER_OPENAI_CONTINUE":    "resume",
	}), &bytes.Buffer{})
	for _, want := range []string{"TETHER_OPENAI_TEMPERATURE", "TETHER_OPENAI_MAX_TOKENS", "TETHER_OPENAI_TIMEOUT",
		`TETHER_OPENAI_CONTINUE="resume": want prefill or restart`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v lacks %q", err, want)
		}
	}
	var stderr bytes.Buffer
	_, herr := Load(Runner, []string{"-h"}, getenv(map[string]string{"DATABASE_URL": "postgres://x", "TETHER_OPENAI_API_KEY": key}), &stderr)
	if herr == nil || (err != nil && strings.Contains(err.Error(), key)) || strings.Contains(stderr.String(), key) ||
		!strings.Contains(stderr.String(), "-openai-model") {
		t.Errorf("the key was shown, or -h lacks the openai flags:\n%v\n%s", err, stderr.String())
	}
}

// Every openai setting is in the settings table of docs/engines.md too,
// which says more about each.
func TestOpenAISettingsInEnginesDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/engines.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range (&Config{}).settings() {
		if strings.HasPrefix(s.env, "TETHER_OPENAI_") {
			n++
			if !strings.Contains(string(doc), "| `"+s.env+"` |") {
				t.Errorf("%s is not in the settings table of docs/engines.md", s.env)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d TETHER_OPENAI_* settings declared", n)
	}
}
