package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/task"
)

// SessionCookie carries the JWT (auth mode) or the signed anonymous user id
// (anonymous mode) of PROTOCOL.md section 1.
const SessionCookie = "tether_session"

// minSecretBytes is the shortest HS256 secret accepted: shorter ones can be
// brute-forced from a single token.
const minSecretBytes = 32

// identity is who a request acts as.
type identity struct {
	user string
	// viaCookie: authenticated by the session cookie, so a WebSocket upgrade
	// or a write must carry a matching Origin.
	viaCookie bool
	// exp is the token's expiry (zero in anonymous mode).
	exp time.Time
	// newCookie is set when anonymous mode just made this user, or renews
	// the user's cookie; the response sets it.
	newCookie *http.Cookie
}

// KeySet finds the public key of a JWT an identity provider signed (RS256,
// ES256, EdDSA, ...) in its published key set; cmd/gateway wires
// internal/jwks.
type KeySet interface {
	// Keyfunc returns the key that verifies t, or an error: a *task.Error
	// with CodeUnavailable when the key may exist but could not be fetched,
	// any other error when t may not be verified by any key of the set.
	Keyfunc(t *jwt.Token) (any, error)
	// Algorithms are every alg a key of the set may verify; never HMAC.
	Algorithms() []string
}

// authenticator implements section 1: JWTs when a secret or a key set is
// configured (HS256 tokens verified with the secret, the others with the key
// set), otherwise an anonymous user per browser in a signed, HttpOnly cookie.
type authenticator struct {
	secret []byte
	keys   KeySet
	// methods are the algs a token may have: HS256 with a secret, and the
	// key set's.
	methods          []string
	audience, issuer string
	cookieKey        []byte
	sessionTTL       time.Duration
	trusted          []netip.Prefix
	now              func() time.Time
}

var errUnauthorized = task.Errorf(task.CodeUnauthorized, "missing, expired or invalid credentials")

// authenticate finds the caller. allowQuery permits ?token= (WebSocket and SSE).
func (a *authenticator) authenticate(r *http.Request, allowQuery bool) (identity, error) {
	if a.anonymousMode() {
		if key, ok := bearer(r); ok {
			return apiKeyUser(key)
		}
		return a.anonymous(r), nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return identity{}, errUnauthorized
		}
		return a.parseJWT(strings.TrimSpace(tok), false)
	}
	if allowQuery {
		if tok := r.URL.Query().Get("token"); tok != "" {
			return a.parseJWT(tok, false)
		}
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		return a.parseJWT(c.Value, true)
	}
	return identity{}, errUnauthorized
}

// anonymousMode: neither a secret nor a key set, so no token can be
// verified and every browser is an anonymous user.
func (a *authenticator) anonymousMode() bool { return len(a.methods) == 0 }

// parseJWT checks a token: its signature (HS256 with the secret, any other
// alg with the key set, which pins one alg family to each key; "none" never),
// a numeric exp in the future (a string is refused, not read as a number),
// nbf and iat when present, aud and iss when configured, and a sub of
// 1..128 bytes. A token whose key could not be fetched is unavailable, not
// unauthorized: the client may try again.
func (a *authenticator) parseJWT(raw string, viaCookie bool) (identity, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(a.methods),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
	}
	if a.audience != "" {
		opts = append(opts, jwt.WithAudience(a.audience))
	}
	if a.issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.issuer))
	}
	// MapClaims rather than RegisteredClaims: the latter reads "exp":"123"
	// as a number.
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(raw, claims, a.keyfunc, opts...); err != nil {
		if task.ErrorCode(err) == task.CodeUnavailable {
			return identity{}, err
		}
		return identity{}, errUnauthorized
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return identity{}, errUnauthorized
	}
	sub, ok := claims["sub"].(string)
	if n := len(sub); !ok || n == 0 || n > task.MaxUserIDBytes {
		return identity{}, errUnauthorized
	}
	return identity{user: sub, viaCookie: viaCookie, exp: exp.Time}, nil
}

// keyfunc picks the key by the token's alg (WithValidMethods has already
// refused an alg that is not configured): the secret for HS256, so a key of
// the set is never an HMAC secret, and the key set for every other alg.
func (a *authenticator) keyfunc(t *jwt.Token) (any, error) {
	if t.Method == jwt.SigningMethodHS256 {
		if a.secret == nil {
			return nil, errUnauthorized
		}
		return a.secret, nil
	}
	if a.keys == nil {
		return nil, errUnauthorized
	}
	return a.keys.Keyfunc(t)
}

// jwtMethods are the algs tokens may have with secret and keys.
func jwtMethods(secret []byte, keys KeySet) []string {
	var m []string
	if secret != nil {
		m = append(m, jwt.SigningMethodHS256.Alg())
	}
	if keys != nil {
		for _, alg := range keys.Algorithms() {
			if !strings.HasPrefix(alg, "HS") && alg != "none" {
				m = append(m, alg)
			}
		}
	}
	return m
}

// anonymous returns the browser's anonymous user, making one (with its
// cookie) when the request carries no valid cookie, and renewing the cookie
// once a day while it is used: it expires SessionTTL after its last renewal.
// The cookie is Secure when the client came over TLS (as a trusted proxy
// may say), so it never travels in clear text after that.
func (a *authenticator) anonymous(r *http.Request) identity {
	now := a.now()
	if c, err := r.Cookie(SessionCookie); err == nil {
		user, issued, ok := a.verifyAnon(c.Value)
		legacy := ok && issued.IsZero()
		if ok && (legacy || now.Sub(issued) < a.sessionTTL) {
			id := identity{user: user, viaCookie: true}
			if legacy || now.Sub(issued) >= renewEvery(a.sessionTTL) {
				id.newCookie = a.cookie(r, user, now)
			}
			return id
		}
	}
	user := "anon-" + uuid.NewString()
	return identity{user: user, viaCookie: true, newCookie: a.cookie(r, user, now)}
}

// maxAPIKeyBytes bounds an anonymous API key (PROTOCOL.md section 11).
const maxAPIKeyBytes = 512

// bearer returns the value of an Authorization: Bearer header, if any.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return "", true // not a bearer header: refused, never ignored
	}
	return strings.TrimSpace(tok), true
}

// apiKeyUser is the anonymous user a bearer value names in anonymous mode
// (PROTOCOL.md section 11): an OpenAI SDK must send some API key, and the same
// key is always the same user. Local use only: whoever knows a key is its
// user. A header that is not "Bearer <1..512 bytes without spaces>" is refused,
// never read as no credentials.
func apiKeyUser(key string) (identity, error) {
	if key == "" || len(key) > maxAPIKeyBytes || strings.ContainsAny(key, " \t") {
		return identity{}, errUnauthorized
	}
	sum := sha256.Sum256([]byte("tether api key\x00" + key))
	return identity{user: "key-" + hex.EncodeToString(sum[:16])}, nil
}

// renewEvery is how old an anonymous cookie gets before it is renewed.
func renewEvery(ttl time.Duration) time.Duration { return min(24*time.Hour, ttl/30) }

func (a *authenticator) cookie(r *http.Request, user string, now time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     SessionCookie,
		Value:    a.signAnon(user, now),
		Path:     "/",
		MaxAge:   int(a.sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   viaTLS(r, a.trusted),
		SameSite: http.SameSiteLaxMode,
	}
}

// The anonymous cookie is user.issued.mac (base64url user, issue time in
// Unix seconds, HMAC-SHA256 of both). A cookie of the first format, user.mac,
// still verifies, as issued long ago, so it is renewed in the new format at
// once and its user keeps their conversations.
func (a *authenticator) mac(user string, issued int64, legacy bool) []byte {
	m := hmac.New(sha256.New, a.cookieKey)
	if legacy {
		m.Write([]byte("tether anonymous session\x00" + user))
	} else {
		m.Write([]byte("tether anonymous session v2\x00" + user + "\x00" + strconv.FormatInt(issued, 10)))
	}
	return m.Sum(nil)
}

func (a *authenticator) signAnon(user string, issued time.Time) string {
	enc := base64.RawURLEncoding
	at := issued.Unix()
	return enc.EncodeToString([]byte(user)) + "." + strconv.FormatInt(at, 10) + "." + enc.EncodeToString(a.mac(user, at, false))
}

// verifyAnon returns the user of a cookie this gateway signed and when it
// was issued (the zero time for a first-format cookie).
func (a *authenticator) verifyAnon(v string) (string, time.Time, bool) {
	enc := base64.RawURLEncoding
	parts := strings.Split(v, ".")
	if len(parts) != 2 && len(parts) != 3 {
		return "", time.Time{}, false
	}
	user, err1 := enc.DecodeString(parts[0])
	mac, err2 := enc.DecodeString(parts[len(parts)-1])
	if err1 != nil || err2 != nil || len(user) == 0 || len(user) > task.MaxUserIDBytes {
		return "", time.Time{}, false
	}
	if len(parts) == 2 {
		return string(user), time.Time{}, hmac.Equal(mac, a.mac(string(user), 0, true))
	}
	at, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !hmac.Equal(mac, a.mac(string(user), at, false)) {
		return "", time.Time{}, false
	}
	return string(user), time.Unix(at, 0), true
}

// originAllowed applies the Origin rule of section 1: exact origins from
// TETHER_ALLOWED_ORIGINS, or by default the gateway's own host.
func originAllowed(origin string, allowed []string, host string) bool {
	if len(allowed) > 0 {
		for _, o := range allowed {
			if strings.EqualFold(o, origin) {
				return true
			}
		}
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

var errForbiddenOrigin = errors.New("origin not allowed")

// checkOrigin enforces the WebSocket Origin rule: a cookie-authenticated
// upgrade needs a matching Origin; a token-authenticated one may omit it, but
// a present Origin must always match.
func checkOrigin(r *http.Request, id identity, allowed []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if id.viaCookie {
			return errForbiddenOrigin
		}
		return nil
	}
	if !originAllowed(origin, allowed, r.Host) {
		return errForbiddenOrigin
	}
	return nil
}
