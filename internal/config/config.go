// Package config is the one configuration loader of the gateway and the
// runner. Every setting is declared once (settings.go) with its environment
// variable, its flag, the components that use it, its type, its default and
// its meaning; both mains load through Load, and the README's table is made
// from the same declarations. A value that does not parse as its type, or is
// out of its range, stops the process at start with a message naming the
// variable (or the flag).
package config

import (
	"cmp"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/jwks"
)

// Component says which process loads the configuration.
type Component uint8

const (
	Gateway Component = 1 << iota
	Runner
)

func (c Component) String() string {
	switch c {
	case Gateway:
		return "gateway"
	case Runner:
		return "runner"
	}
	return "gateway, runner"
}

// setting is one declared setting.
type setting struct {
	env, flag string
	users     Component
	// def is the default as it would be written in the environment ("" =
	// unset); runnerDef, when set, is the runner's own default.
	def, runnerDef string
	// defDoc describes the default in the README when it is not simply def.
	defDoc string
	doc    string
	// secret: the value is never repeated in an error or in -h.
	secret bool
	value  parser
}

// parser parses a setting's text into its field.
type parser interface {
	set(s string) error
	// kind names the type for -h ("duration", "integer", ...).
	kind() string
}

func (s setting) defaultFor(c Component) string {
	if c == Runner && s.runnerDef != "" {
		return s.runnerDef
	}
	return s.def
}

// Load reads the settings of component c from getenv, then from the flags in
// args, which take precedence. Every bad value is reported, each naming its
// variable or flag; -h prints the flags to stderr and returns flag.ErrHelp.
func Load(c Component, args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	cfg := &Config{}
	fs := flag.NewFlagSet(c.String(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [flags]    serve (applying pending migrations first unless -migrate=false)\n", c)
		fmt.Fprintf(stderr, "       %s migrate [flags]    apply the pending migrations and exit\n", c)
		fmt.Fprintf(stderr, "Each flag falls back to the environment variable in its parentheses:\n")
		fs.PrintDefaults()
	}
	var errs, flagErrs []error
	for _, s := range cfg.settings() {
		if s.users&c == 0 {
			continue
		}
		v, fromEnv := getenv(s.env), true
		if v == "" {
			v, fromEnv = s.defaultFor(c), false
		}
		if err := s.value.set(v); err != nil {
			if fromEnv {
				errs = append(errs, fmt.Errorf("%s=%s: %w", s.env, shown(s, v), err))
			} else {
				errs = append(errs, fmt.Errorf("%s: default %q: %w", s.env, v, err)) // a bug in settings.go
			}
		}
		usage := s.doc + " (" + s.env + ")"
		fs.Var(flagValue{s: s, text: v, errs: &flagErrs}, s.flag, strings.ReplaceAll(usage, "`", ""))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := errors.Join(flagErrs...); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if c == Runner && cfg.Engine == "openai" && cfg.OpenAIModel == "" {
		return nil, errors.New("TETHER_OPENAI_MODEL (-openai-model) is required with TETHER_ENGINE=openai: the model name the server knows (docs/engines.md)")
	}
	if c == Gateway && cfg.UploadS3Bucket == "" {
		for _, s := range []struct{ env, v string }{
			{"TETHER_UPLOAD_S3_ENDPOINT", cfg.UploadS3Endpoint},
			{"TETHER_UPLOAD_S3_REGION", cfg.UploadS3Region},
		} {
			if s.v != "" {
				return nil, fmt.Errorf("%s is set but TETHER_UPLOAD_S3_BUCKET is not: name the bucket, or unset it to keep uploads in TETHER_UPLOAD_DIR", s.env)
			}
		}
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set: point it (or -database-url) at Postgres, or use `make run`, which starts a private one")
	}
	return cfg, nil
}

// shown is how a bad value appears in an error: quoted, or hidden for a secret.
func shown(s setting, v string) string {
	if s.secret {
		return "<hidden>"
	}
	return strconv.Quote(v)
}

// flagValue adapts a setting to flag.Value. A bad value is collected in
// errs, naming the flag and its variable, rather than returned to the flag
// package, which would repeat the value (a secret, perhaps) in its message.
type flagValue struct {
	s    setting
	text string
	errs *[]error
}

func (f flagValue) String() string {
	if f.s.value == nil || f.s.secret {
		return ""
	}
	return f.text
}

// IsBoolFlag lets a boolean setting's flag stand alone: -migrate means
// -migrate=true.
func (f flagValue) IsBoolFlag() bool { _, ok := f.s.value.(boolValue); return ok }

func (f flagValue) Set(v string) error {
	if err := f.s.value.set(v); err != nil {
		*f.errs = append(*f.errs, fmt.Errorf("-%s=%s (%s): %w", f.s.flag, shown(f.s, v), f.s.env, err))
	}
	return nil
}

// DeriveKey derives a 32-byte key for one purpose (label) from a secret with
// HKDF-SHA256, so one configured secret yields independent keys: a cursor
// key learnt from one purpose says nothing about the JWT secret.
func DeriveKey(secret []byte, label string) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, "tether "+label, 32)
	if err != nil {
		panic(err) // only for lengths HKDF cannot make
	}
	return k
}

// ---- parsers -------------------------------------------------------------

type strValue struct{ p *string }

func str(p *string) parser                   { return strValue{p} }
func (v strValue) set(s string) error        { *v.p = strings.TrimSpace(s); return nil }
func (v strValue) kind() string              { return "string" }
func secretStr(p *string, minLen int) parser { return secretValue{p, minLen} }

type secretValue struct {
	p      *string
	minLen int
}

func (v secretValue) set(s string) error {
	if s != "" && len(s) < v.minLen {
		return fmt.Errorf("too short: want at least %d bytes, got %d", v.minLen, len(s))
	}
	*v.p = s
	return nil
}
func (v secretValue) kind() string { return "secret" }

type intValue struct {
	p        *int
	min, max int
}

func integer(p *int, min, max int) parser { return intValue{p, min, max} }

func (v intValue) set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want an integer")
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("want an integer from %d to %d", v.min, v.max)
	}
	*v.p = n
	return nil
}
func (v intValue) kind() string { return "integer" }

type floatValue struct {
	p   *float64
	min float64
}

func float(p *float64, min float64) parser { return floatValue{p, min} }

func (v floatValue) set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("want a number")
	}
	if f < v.min {
		return fmt.Errorf("want a number of at least %v", v.min)
	}
	*v.p = f
	return nil
}
func (v floatValue) kind() string { return "number" }

type boolValue struct{ p *bool }

func boolean(p *bool) parser { return boolValue{p} }

func (v boolValue) set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}
func (v boolValue) kind() string { return "boolean" }

type optFloatValue struct {
	p        **float64
	min, max float64
}

// optFloat is a number that may be unset (nil).
func optFloat(p **float64, min, max float64) parser { return optFloatValue{p, min, max} }

func (v optFloatValue) set(s string) error {
	if s = strings.TrimSpace(s); s == "" {
		*v.p = nil
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < v.min || f > v.max {
		return fmt.Errorf("want a number from %v to %v", v.min, v.max)
	}
	*v.p = &f
	return nil
}
func (v optFloatValue) kind() string { return "number" }

type choiceValue struct {
	p      *string
	values []string
}

// choice is one of values, read without regard to case.
func choice(p *string, values ...string) parser { return choiceValue{p, values} }

func (v choiceValue) set(s string) error {
	s = strings.ToLower(strings.TrimSpace(s))
	if !slices.Contains(v.values, s) {
		return fmt.Errorf("want %s", strings.Join(v.values, " or "))
	}
	*v.p = s
	return nil
}
func (v choiceValue) kind() string { return "choice" }

type durationValue struct{ p *time.Duration }

func duration(p *time.Duration) parser { return durationValue{p} }

func (v durationValue) set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 500ms, 15s or 24h")
	}
	*v.p = d
	return nil
}
func (v durationValue) kind() string { return "duration" }

type listValue struct{ p *[]string }

func list(p *[]string) parser { return listValue{p} }

func (v listValue) set(s string) error {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	*v.p = out
	return nil
}
func (v listValue) kind() string { return "list" }

type urlsValue struct{ p *[]string }

// urls is a comma-separated list of http(s) URLs.
func urls(p *[]string) parser { return urlsValue{p} }

func (v urlsValue) set(s string) error {
	var l []string
	if err := list(&l).set(s); err != nil {
		return err
	}
	for _, u := range l {
		if err := jwks.CheckURL(u); err != nil {
			return err
		}
	}
	*v.p = l
	return nil
}
func (v urlsValue) kind() string { return "URL list" }

type prefixValue struct{ p *[]netip.Prefix }

func prefixes(p *[]netip.Prefix) parser { return prefixValue{p} }

func (v prefixValue) set(s string) error {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			// A bare address is a /32 (or /128).
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	*v.p = out
	return nil
}
func (v prefixValue) kind() string { return "CIDR list" }

type levelValue struct{ p *slog.Level }

func level(p *slog.Level) parser { return levelValue{p} }

func (v levelValue) set(s string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return errors.New("want debug, info, warn or error")
	}
	*v.p = l
	return nil
}
func (v levelValue) kind() string { return "level" }

// dur writes a default duration the way the README and -h show it: 10m and
// 24h rather than Go's 10m0s and 24h0m0s, and under two minutes in
// seconds (60s, 90s) as PROTOCOL.md writes them.
func dur(d time.Duration) string {
	if d < 2*time.Minute && d >= time.Second && d%time.Second == 0 {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// defaultDoc is the README's default column for s.
func (s setting) defaultDoc() string {
	return cmp.Or(s.defDoc, "`"+s.def+"`")
}
