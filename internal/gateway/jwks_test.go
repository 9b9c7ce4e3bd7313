package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/jwks"
	"github.com/tether-dev/tether/internal/jwks/jwkstest"
)

const (
	idpIssuer   = "https://tenant.idp.example/"
	idpAudience = "https://api.tether.example"
)

// setupIdP is a gateway that signs users in with the identity provider
// behind srv (and, withSecret, HS256 tokens with the test secret too).
// unknownKIDEvery is the set's refresh limit for unknown kids.
func setupIdP(t *testing.T, srv *jwkstest.Server, withSecret bool, unknownKIDEvery time.Duration) *env {
	t.Helper()
	set, err := jwks.New(t.Context(), jwks.Config{URLs: []string{srv.URL}, UnknownKIDEvery: unknownKIDEvery, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return setup(t, func(o *envOptions) {
		o.noRunner = true
		o.anonymous = !withSecret // no secret: the key set alone
		o.gateway.Keys = set
		o.gateway.JWTIssuer = idpIssuer
		o.gateway.JWTAudience = idpAudience
	})
}

// idpClaims are an identity provider's claims for user, valid for d.
func idpClaims(user string, d time.Duration) jwt.MapClaims {
	return jwt.MapClaims{"sub": user, "exp": time.Now().Add(d).Unix(), "iat": time.Now().Unix(),
		"iss": idpIssuer, "aud": []string{idpAudience, idpIssuer + "userinfo"}}
}

// getAs is GET /v1/conversations with token; it returns the status, the
// error code and the Retry-After header.
func (e *env) getAs(token string) (int, string, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error.Code, resp.Header.Get("Retry-After")
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// hsToken is an HS256 token of the test secret with the provider's aud and
// iss, which the gateway checks on every token.
func (e *env) hsToken(user string) string {
	e.t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, idpClaims(user, time.Hour)).SignedString(e.secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestIdPSignIn: tokens of RSA, ECDSA P-256 and Ed25519 keys from a JWK Set
// sign users in over HTTP, WebSocket and ?token=; aud and iss are checked
// as for HS256 tokens.
func TestIdPSignIn(t *testing.T) {
	t.Parallel()
	keys := []*jwkstest.Key{jwkstest.RSA(t, "rsa-1"), jwkstest.EC(t, "ec-1"), jwkstest.Ed25519(t, "ed-1")}
	srv := jwkstest.NewServer(t, keys...)
	e := setupIdP(t, srv, false, time.Hour)
	for _, k := range keys {
		tok := k.Sign(t, idpClaims("user-"+k.KID, time.Hour))
		if status, code, _ := e.getAs(tok); status != http.StatusOK {
			t.Errorf("%s over HTTP: %d %s", k.Method.Alg(), status, code)
		}
		tb, resp, err := e.dialQuery(tok)
		if err != nil {
			t.Fatalf("%s over WebSocket: %v %v", k.Method.Alg(), err, resp)
		}
		if f := tb.call(map[string]any{"type": "conversations"}); f.Type != "conversations" {
			t.Errorf("%s tab: %s", k.Method.Alg(), f.raw)
		}
	}
	for name, c := range map[string]jwt.MapClaims{
		"other issuer":   {"iss": "https://evil.example/"},
		"other audience": {"aud": "https://other.example"},
		"expired":        {"exp": time.Now().Add(-time.Minute).Unix()},
		"no sub":         {"sub": ""},
	} {
		claims := idpClaims("u", time.Hour)
		for k, v := range c {
			claims[k] = v
		}
		if status, code, _ := e.getAs(keys[0].Sign(t, claims)); status != http.StatusUnauthorized || code != "unauthorized" {
			t.Errorf("%s: %d %s, want 401 unauthorized", name, status, code)
		}
	}
	// JWKS alone is JWT mode: a page load gets no anonymous cookie (it
	// would replace an app's token cookie), and HS256 is no method at all.
	resp, err := http.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("a page load set a cookie with a key set configured: %s", c)
	}
	hs, err := jwt.NewWithClaims(jwt.SigningMethodHS256, idpClaims("u", time.Hour)).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.getAs(hs); status != http.StatusUnauthorized {
		t.Errorf("HS256 without a secret configured: %d, want 401", status)
	}
}

// TestIdPRotationMidSession: the provider rotates its key. A tab signed in
// with the old key's token keeps working (tokens are checked at the
// upgrade; the tab lives until its exp, when it is closed 1008); a new
// token of the new key is accepted through the refresh its unknown kid
// causes; the old key, gone from the set, signs no new session.
func TestIdPRotationMidSession(t *testing.T) {
	t.Parallel()
	oldKey, newKey := jwkstest.RSA(t, "2026-11"), jwkstest.RSA(t, "2026-12")
	srv := jwkstest.NewServer(t, oldKey)
	e := setupIdP(t, srv, false, time.Hour)

	long, _, err := e.dialHeader(bearer(oldKey.Sign(t, idpClaims("ana", time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	expiring := time.Now().Add(4 * time.Second).Truncate(time.Second)
	short, _, err := e.dialHeader(bearer(oldKey.Sign(t, jwt.MapClaims{"sub": "ana", "exp": expiring.Unix(),
		"iss": idpIssuer, "aud": idpAudience})))
	if err != nil {
		t.Fatal(err)
	}

	srv.SetKeys(newKey)
	fetches := srv.Fetches()
	fresh, resp, err := e.dialHeader(bearer(newKey.Sign(t, idpClaims("ana", time.Hour))))
	if err != nil {
		t.Fatalf("a token of the new key: %v %v", err, resp)
	}
	if n := srv.Fetches() - fetches; n != 1 {
		t.Errorf("the new kid caused %d JWKS fetches, want 1", n)
	}
	for name, tb := range map[string]*tab{"old-key tab": long, "new-key tab": fresh} {
		if f := tb.call(map[string]any{"type": "conversations"}); f.Type != "conversations" {
			t.Errorf("%s after the rotation: %s", name, f.raw)
		}
	}
	if status, code, _ := e.getAs(oldKey.Sign(t, idpClaims("ana", time.Hour))); status != http.StatusUnauthorized {
		t.Errorf("a new request with the removed key: %d %s, want 401", status, code)
	}
	if code := short.closed(); code != websocket.StatusPolicyViolation {
		t.Errorf("the old-key tab at its exp: closed %d, want 1008", code)
	}
}

// TestIdPRefusals: a forged kid (an attacker's key, a kid the set does not
// have) is unauthorized after at most one refresh; an HS256 token whose
// secret is the provider's public key, naming its kid, is refused with a
// secret configured or not; so are alg none and an expired token.
func TestIdPRefusals(t *testing.T) {
	t.Parallel()
	key := jwkstest.EC(t, "key")
	srv := jwkstest.NewServer(t, key)
	for _, withSecret := range []bool{false, true} {
		e := setupIdP(t, srv, withSecret, time.Hour)
		forged := jwkstest.EC(t, "forged-kid")
		for range 3 {
			before := srv.Fetches()
			if status, code, _ := e.getAs(forged.Sign(t, idpClaims("mallory", time.Hour))); status != http.StatusUnauthorized || code != "unauthorized" {
				t.Errorf("secret %v: a forged kid: %d %s, want 401 unauthorized", withSecret, status, code)
			}
			if n := srv.Fetches() - before; n > 1 {
				t.Errorf("secret %v: a forged kid caused %d fetches", withSecret, n)
			}
		}
		confused := func(secret []byte) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, idpClaims("mallory", time.Hour))
			tok.Header["kid"] = key.KID
			s, err := tok.SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		none := func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, idpClaims("mallory", time.Hour))
			tok.Header["kid"] = key.KID
			s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		// alg "none" with the provider's signature attached, the other
		// classic: it must not be read as "no signature to check".
		good := key.Sign(t, idpClaims("mallory", time.Hour))
		parts := strings.Split(good, ".")
		header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"key","typ":"JWT"}`))
		for name, tok := range map[string]string{
			"HS256 with the public key's DER": confused(key.PublicBytes(t)),
			"HS256 with the JWK's x":          confused([]byte(key.JWK["x"].(string))),
			"alg none":                        none(),
			"alg none, signature kept":        header + "." + parts[1] + "." + parts[2],
			"expired":                         key.Sign(t, idpClaims("mallory", -time.Minute)),
		} {
			if status, code, _ := e.getAs(tok); status != http.StatusUnauthorized || code != "unauthorized" {
				t.Errorf("secret %v: %s: %d %s, want 401 unauthorized", withSecret, name, status, code)
			}
			if _, resp, err := e.dialQuery(tok); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("secret %v: %s over WebSocket: %v %v, want a refused upgrade (401)", withSecret, name, err, resp)
			}
		}
		if status, _, _ := e.getAs(good); status != http.StatusOK {
			t.Errorf("secret %v: the provider's key: %d", withSecret, status)
		}
		if withSecret {
			if status, _, _ := e.getAs(e.hsToken("hs-user")); status != http.StatusOK {
				t.Errorf("an HS256 token with both configured: %d", status)
			}
		}
	}
}

// TestIdPDown: the JWK Set endpoint is down when the gateway starts. It
// serves: HS256 tokens work, a token whose key is not cached is unavailable
// (503 with Retry-After; a refused WebSocket upgrade with 503), and it is
// accepted once the endpoint answers. When the endpoint goes down again,
// the cached key keeps working.
func TestIdPDown(t *testing.T) {
	t.Parallel()
	k := jwkstest.Ed25519(t, "k")
	srv := jwkstest.NewServer(t, k)
	srv.SetDown(true)
	e := setupIdP(t, srv, true, time.Millisecond)
	tok := k.Sign(t, idpClaims("ana", time.Hour))

	if status, code, retry := e.getAs(tok); status != http.StatusServiceUnavailable || code != "unavailable" || retry == "" {
		t.Errorf("while the set cannot be fetched: %d %s Retry-After %q, want 503 unavailable with Retry-After", status, code, retry)
	}
	if _, resp, err := e.dialQuery(tok); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("over WebSocket while the set cannot be fetched: %v %v, want 503", err, resp)
	}
	if status, _, _ := e.getAs(e.hsToken("hs-user")); status != http.StatusOK {
		t.Errorf("an HS256 token while the set is down: %d", status)
	}

	srv.SetDown(false)
	eventually.True(t, "the token accepted once the endpoint answers", func() bool {
		status, _, _ := e.getAs(tok)
		return status == http.StatusOK
	})

	srv.SetDown(true)
	forged := jwkstest.Ed25519(t, "unknown")
	eventually.True(t, "an unknown kid unavailable once a fetch has failed", func() bool {
		status, _, _ := e.getAs(forged.Sign(t, idpClaims("mallory", time.Hour)))
		return status == http.StatusServiceUnavailable
	})
	if status, code, _ := e.getAs(tok); status != http.StatusOK {
		t.Errorf("a cached key while the endpoint is down: %d %s", status, code)
	}
	tb, resp, err := e.dialHeader(bearer(tok))
	if err != nil {
		t.Fatalf("a tab with a cached key while the endpoint is down: %v %v", err, resp)
	}
	if f := tb.call(map[string]any{"type": "conversations"}); f.Type != "conversations" {
		t.Errorf("the tab: %s", f.raw)
	}
}
