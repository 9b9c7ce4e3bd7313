package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/task"
)

// SessionCookie carries the JWT (auth mode) or the signed anonymous user id
// (anonymous mode) of PROTOCOL.md section 1.
const SessionCookie = "tether_session"

// identity is who a request acts as.
type identity struct {
	user string
	// viaCookie: authenticated by the session cookie, so a WebSocket upgrade
	// must carry a matching Origin.
	viaCookie bool
	// exp is the token's expiry (zero in anonymous mode).
	exp time.Time
	// newCookie is set when anonymous mode just made this user.
	newCookie *http.Cookie
}

// authenticator implements section 1: HS256 JWTs when a secret is set,
// otherwise an anonymous user per browser in a signed, HttpOnly cookie.
type authenticator struct {
	secret    []byte
	cookieKey []byte
	now       func() time.Time
}

var errUnauthorized = task.Errorf(task.CodeUnauthorized, "missing, expired or invalid credentials")

// authenticate finds the caller. allowQuery permits ?token= (WebSocket and SSE).
func (a *authenticator) authenticate(r *http.Request, allowQuery bool) (identity, error) {
	if a.secret == nil {
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

func (a *authenticator) parseJWT(raw string, viaCookie bool) (identity, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
	)
	if err != nil {
		return identity{}, errUnauthorized
	}
	if n := len(claims.Subject); n == 0 || n > task.MaxUserIDBytes {
		return identity{}, errUnauthorized
	}
	return identity{user: claims.Subject, viaCookie: viaCookie, exp: claims.ExpiresAt.Time}, nil
}

// anonymous returns the browser's anonymous user, making one (with its
// cookie) when the request carries no valid cookie.
func (a *authenticator) anonymous(r *http.Request) identity {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if user, ok := a.verifyAnon(c.Value); ok {
			return identity{user: user, viaCookie: true}
		}
	}
	user := "anon-" + uuid.NewString()
	return identity{user: user, viaCookie: true, newCookie: &http.Cookie{
		Name:     SessionCookie,
		Value:    a.signAnon(user),
		Path:     "/",
		MaxAge:   400 * 24 * 60 * 60,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}}
}

func (a *authenticator) mac(user string) []byte {
	m := hmac.New(sha256.New, a.cookieKey)
	m.Write([]byte("tether anonymous session\x00" + user))
	return m.Sum(nil)
}

func (a *authenticator) signAnon(user string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(user)) + "." + enc.EncodeToString(a.mac(user))
}

func (a *authenticator) verifyAnon(v string) (string, bool) {
	enc := base64.RawURLEncoding
	u, sig, ok := strings.Cut(v, ".")
	if !ok {
		return "", false
	}
	user, err1 := enc.DecodeString(u)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || len(user) == 0 || len(user) > task.MaxUserIDBytes {
		return "", false
	}
	return string(user), hmac.Equal(mac, a.mac(string(user)))
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
