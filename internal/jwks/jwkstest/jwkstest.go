// Package jwkstest is an identity provider for tests: keys a test makes
// (RSA, ECDSA P-256, Ed25519), tokens signed with them, and a real HTTP JWK
// Set endpoint on 127.0.0.1 that counts its fetches and can go down.
//
// Tests only: internal/eventually's TestOnlyTestsImport keeps it out of
// binaries.
package jwkstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Key is a signing key with the JWK its provider publishes.
type Key struct {
	KID    string
	Method jwt.SigningMethod
	// Private signs; Public is what the JWK holds.
	Private crypto.Signer
	// JWK is the public key as a JWK Set member, alg included.
	JWK map[string]any
}

// RSA makes an RS256 key (2048 bits).
func RSA(t testing.TB, kid string) *Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Method: jwt.SigningMethodRS256, Private: k, JWK: map[string]any{
		"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()),
	}}
}

// EC makes an ES256 key (P-256).
func EC(t testing.TB, kid string) *Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Method: jwt.SigningMethodES256, Private: k, JWK: map[string]any{
		"kty": "EC", "kid": kid, "alg": "ES256", "use": "sig", "crv": "P-256",
		"x": b64(pub[1:33]), "y": b64(pub[33:]),
	}}
}

// Ed25519 makes an EdDSA key.
func Ed25519(t testing.TB, kid string) *Key {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Method: jwt.SigningMethodEdDSA, Private: priv, JWK: map[string]any{
		"kty": "OKP", "kid": kid, "alg": "EdDSA", "use": "sig", "crv": "Ed25519", "x": b64(pub),
	}}
}

// PublicBytes is the public key in PKIX DER, the bytes an attacker would
// try as an HMAC secret.
func (k *Key) PublicBytes(t testing.TB) []byte {
	t.Helper()
	b, err := x509.MarshalPKIXPublicKey(k.Private.Public())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign makes a token with claims, signed by k, naming k's kid.
func (k *Key) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.Method, claims)
	tok.Header["kid"] = k.KID
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Server is a JWK Set endpoint.
type Server struct {
	URL     string
	fetches atomic.Int64
	down    atomic.Bool

	mu   sync.Mutex
	keys []*Key
}

// NewServer serves keys at URL until the test ends.
func NewServer(t testing.TB, keys ...*Key) *Server {
	t.Helper()
	s := &Server{keys: keys}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/.well-known/jwks.json"
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.fetches.Add(1)
	if s.down.Load() {
		// Down as a crashed server is: the connection ends without an answer.
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
		return
	}
	s.mu.Lock()
	set := map[string]any{"keys": []map[string]any{}}
	for _, k := range s.keys {
		set["keys"] = append(set["keys"].([]map[string]any), k.JWK)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// SetKeys replaces the published keys (a rotation).
func (s *Server) SetKeys(keys ...*Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

// SetDown makes the endpoint fail every request (true) or answer again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Fetches counts the requests the endpoint has had, failed ones included.
func (s *Server) Fetches() int64 { return s.fetches.Load() }

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
