package jwks_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/jwks"
	"github.com/tether-dev/tether/internal/jwks/jwkstest"
	"github.com/tether-dev/tether/internal/task"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newSet makes a Set on srv that ends with the test.
func newSet(t *testing.T, srv *jwkstest.Server, unknownKIDEvery time.Duration) *jwks.Set {
	t.Helper()
	s, err := jwks.New(t.Context(), jwks.Config{URLs: []string{srv.URL}, UnknownKIDEvery: unknownKIDEvery, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parse(s *jwks.Set, raw string) error {
	_, err := jwt.Parse(raw, s.Keyfunc, jwt.WithValidMethods(s.Algorithms()), jwt.WithExpirationRequired())
	return err
}

func claims() jwt.MapClaims {
	return jwt.MapClaims{"sub": "u", "exp": time.Now().Add(time.Hour).Unix()}
}

func unavailable(err error) bool { return task.ErrorCode(err) == task.CodeUnavailable }

// TestKeyTypes: a token of each key type is verified by the key its kid
// names, and only by it: alg is pinned to the key.
func TestKeyTypes(t *testing.T) {
	t.Parallel()
	rsaKey, ecKey, edKey := jwkstest.RSA(t, "rsa"), jwkstest.EC(t, "ec"), jwkstest.Ed25519(t, "ed")
	srv := jwkstest.NewServer(t, rsaKey, ecKey, edKey)
	s := newSet(t, srv, time.Hour)
	for _, k := range []*jwkstest.Key{rsaKey, ecKey, edKey} {
		if err := parse(s, k.Sign(t, claims())); err != nil {
			t.Errorf("%s token: %v", k.Method.Alg(), err)
		}
	}
	// The EC key's signature under the RSA key's kid: the kid's key, an RSA
	// key published for RS256, does not take ES256.
	wrongKID := *ecKey
	wrongKID.KID = "rsa"
	if err := parse(s, wrongKID.Sign(t, claims())); err == nil {
		t.Error("an ES256 token naming an RS256 key was accepted")
	}
	noKID := jwt.NewWithClaims(jwt.SigningMethodRS256, claims())
	raw, err := noKID.SignedString(rsaKey.Private)
	if err != nil {
		t.Fatal(err)
	}
	if err := parse(s, raw); err == nil {
		t.Error("a token without a kid was accepted")
	}
}

// TestKeyTypeDecidesWithoutAlg: a JWK that gives no alg takes only the
// algorithms of its type (an EC P-256 key: ES256, not EdDSA; RSA: PS256 too), and
// a key marked for encryption verifies nothing.
func TestKeyTypeDecidesWithoutAlg(t *testing.T) {
	t.Parallel()
	ecKey, rsaKey, encKey := jwkstest.EC(t, "ec"), jwkstest.RSA(t, "rsa"), jwkstest.RSA(t, "enc")
	delete(ecKey.JWK, "alg")
	delete(rsaKey.JWK, "alg")
	encKey.JWK["use"] = "enc"
	s := newSet(t, jwkstest.NewServer(t, ecKey, rsaKey, encKey), time.Hour)
	if err := parse(s, ecKey.Sign(t, claims())); err != nil {
		t.Errorf("ES256 with a P-256 key without alg: %v", err)
	}
	pss := *rsaKey
	pss.Method = jwt.SigningMethodPS256
	if err := parse(s, pss.Sign(t, claims())); err != nil {
		t.Errorf("PS256 with an RSA key without alg: %v", err)
	}
	ed := jwkstest.Ed25519(t, "ec")
	if err := parse(s, ed.Sign(t, claims())); err == nil {
		t.Error("EdDSA accepted for a P-256 key")
	}
	if err := parse(s, encKey.Sign(t, claims())); err == nil {
		t.Error("a key with use=enc verified a token")
	}
}

// TestNeverHMAC: a symmetric ("oct") key in a set is never an HMAC secret,
// even when the caller's methods would let HS256 through, and an HS256
// token whose secret is an RSA key's public bytes is refused.
func TestNeverHMAC(t *testing.T) {
	t.Parallel()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	oct := &jwkstest.Key{KID: "oct", JWK: map[string]any{"kty": "oct", "kid": "oct", "alg": "HS256",
		"k": base64.RawURLEncoding.EncodeToString(secret)}}
	rsaKey := jwkstest.RSA(t, "rsa")
	s := newSet(t, jwkstest.NewServer(t, oct, rsaKey), time.Hour)
	hs := func(kid string, key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
		tok.Header["kid"] = kid
		raw, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for name, raw := range map[string]string{
		"the set's oct key":        hs("oct", secret),
		"the RSA key's public DER": hs("rsa", rsaKey.PublicBytes(t)),
		"the RSA key's modulus":    hs("rsa", []byte(rsaKey.JWK["n"].(string))),
	} {
		_, err := jwt.Parse(raw, s.Keyfunc, jwt.WithValidMethods([]string{"HS256"}))
		if err == nil {
			t.Errorf("HS256 with %s was accepted", name)
		}
	}
	for _, alg := range s.Algorithms() {
		if strings.HasPrefix(alg, "HS") || alg == "none" {
			t.Errorf("Algorithms offers %s", alg)
		}
	}
}

// TestRotation: a key published after the set was fetched is found by the
// one refresh its unknown kid causes; the key that went is refused.
func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := jwkstest.EC(t, "2026-01"), jwkstest.EC(t, "2026-02")
	srv := jwkstest.NewServer(t, oldKey)
	s := newSet(t, srv, time.Hour)
	if err := parse(s, oldKey.Sign(t, claims())); err != nil {
		t.Fatal(err)
	}
	srv.SetKeys(newKey)
	before := srv.Fetches()
	if err := parse(s, newKey.Sign(t, claims())); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
	if n := srv.Fetches() - before; n != 1 {
		t.Errorf("the new kid caused %d fetches, want 1", n)
	}
	if err := parse(s, oldKey.Sign(t, claims())); err == nil || unavailable(err) {
		t.Errorf("a token of the removed key: %v, want refused as unknown", err)
	}
}

// TestUnknownKIDFlood: a thousand tokens with random kids, signed by a key
// the provider never published, are all refused (not unavailable: the
// provider answers), and cause at most one fetch per UnknownKIDEvery.
func TestUnknownKIDFlood(t *testing.T) {
	t.Parallel()
	srv := jwkstest.NewServer(t, jwkstest.RSA(t, "real"))
	s := newSet(t, srv, jwks.DefaultUnknownKIDEvery)
	attacker := jwkstest.Ed25519(t, "")
	tokens := make([]string, 1000)
	for i := range tokens {
		attacker.KID = rand.Text()
		tokens[i] = attacker.Sign(t, claims())
	}
	before := srv.Fetches()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(tokens))
	for w := range 50 {
		wg.Go(func() {
			for i := w; i < len(tokens); i += 50 {
				errs <- parse(s, tokens[i])
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		if err == nil || unavailable(err) {
			t.Fatalf("a forged kid: %v, want refused as unknown", err)
		}
	}
	fetches := srv.Fetches() - before
	// One for the limiter's burst, then one per interval that passed.
	if allowed := 1 + int64(elapsed/jwks.DefaultUnknownKIDEvery); fetches > allowed {
		t.Errorf("%d fetches in %v, the limit allows %d", fetches, elapsed, allowed)
	}
	perMinute := float64(fetches) / max(elapsed.Minutes(), jwks.DefaultUnknownKIDEvery.Minutes())
	t.Logf("unknown-kid flood: %d tokens in %v caused %d JWKS fetches (at most %.1f a minute; the limit is one per %v)",
		len(tokens), elapsed.Round(time.Millisecond), fetches, perMinute, jwks.DefaultUnknownKIDEvery)
}

// TestDownAtStart: a set that cannot be fetched at start is no error; a
// token whose key is not cached is unavailable, and accepted once the
// endpoint answers.
func TestDownAtStart(t *testing.T) {
	t.Parallel()
	k := jwkstest.RSA(t, "k")
	srv := jwkstest.NewServer(t, k)
	srv.SetDown(true)
	s := newSet(t, srv, time.Millisecond)
	raw := k.Sign(t, claims())
	if err := parse(s, raw); !unavailable(err) {
		t.Fatalf("while the endpoint is down: %v, want unavailable", err)
	}
	srv.SetDown(false)
	eventually.True(t, "the token accepted once the endpoint is up", func() bool { return parse(s, raw) == nil })
}

// TestDownLater: once fetched, keys keep working while the endpoint is
// down; an unknown kid is then unavailable, since the key may be there.
func TestDownLater(t *testing.T) {
	t.Parallel()
	k := jwkstest.EC(t, "k")
	srv := jwkstest.NewServer(t, k)
	s := newSet(t, srv, time.Millisecond)
	srv.SetDown(true)
	forged := jwkstest.EC(t, "not-published")
	eventually.True(t, "an unknown kid unavailable", func() bool {
		return unavailable(parse(s, forged.Sign(t, claims())))
	})
	if err := parse(s, k.Sign(t, claims())); err != nil {
		t.Fatalf("a cached key while the endpoint is down: %v", err)
	}
}

// TestBadURL: an endpoint that is not an http(s) URL stops New.
func TestBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "example.com/jwks", "ftp://example.com/jwks", "https://"} {
		if _, err := jwks.New(context.Background(), jwks.Config{URLs: []string{u}}); err == nil {
			t.Errorf("New accepted %q", u)
		}
	}
	if _, err := jwks.New(context.Background(), jwks.Config{}); err == nil {
		t.Error("New accepted no URL")
	}
}
