// Package jwks finds the public keys that verify the JWTs identity
// providers sign (Auth0, Clerk, Supabase, Keycloak, Cognito, Firebase):
// RS256, ES256 or EdDSA tokens whose key, named by the token's kid, is
// published in a JWK Set at a URL and rotates.
//
// The fetching and caching are github.com/MicahParks/jwkset's, the lookup
// by kid github.com/MicahParks/keyfunc's; this package adds what a gateway
// needs on top: an algorithm pinned to each key, never a key for HMAC, and
// the difference between a key nobody published (unauthorized) and a key
// that may exist but could not be fetched (unavailable).
package jwks

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/tether-dev/tether/internal/task"
)

// Defaults of Config that are settings; internal/config declares them with
// these.
const (
	// DefaultRefresh: identity providers publish a new key well before they
	// sign with it, so an hourly fetch sees it first; a token signed with a
	// key fetched later still gets one refresh of its own (UnknownKIDEvery).
	DefaultRefresh = time.Hour
	// DefaultUnknownKIDEvery bounds the fetches tokens with unknown kids
	// cause: two a minute to each provider however many such tokens come.
	DefaultUnknownKIDEvery = 30 * time.Second
	// DefaultFetchTimeout bounds one fetch of a JWK Set.
	DefaultFetchTimeout = 10 * time.Second
)

// minRSABits is the smallest RSA modulus accepted.
const minRSABits = 2048

// Config says where the key sets are and how often they are fetched. The
// zero value of every field but URLs works.
type Config struct {
	// URLs are the JWK Set endpoints (each http or https); a token's kid is
	// looked up in all of them.
	URLs []string
	// Refresh is how often each set is fetched in the background. Default
	// DefaultRefresh.
	Refresh time.Duration
	// UnknownKIDEvery is the least time between two fetches caused by
	// tokens whose kid is in no cached set. Default DefaultUnknownKIDEvery.
	UnknownKIDEvery time.Duration
	// FetchTimeout bounds one fetch. Default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Client makes the requests. Default: a client with FetchTimeout.
	Client *http.Client
	Logger *slog.Logger
}

// Set is the key sets of one or more identity providers, cached and
// refreshed in the background.
type Set struct {
	ctx          context.Context
	kf           keyfunc.Keyfunc
	caches       []jwkset.Storage
	fetchTimeout time.Duration
	log          *slog.Logger

	mu sync.Mutex
	// down holds, per URL, the error of its last fetch, when it failed; a
	// URL whose last fetch succeeded is absent.
	down map[string]error
}

var errNotFetched = errors.New("not fetched yet")

// New fetches every set once (an endpoint that cannot be reached is logged,
// not an error: the gateway starts, and tokens whose key it has not cached
// answer unavailable until a fetch succeeds) and refreshes them until ctx
// ends. The refresh goroutines are jwkset's; they end with ctx.
func New(ctx context.Context, cfg Config) (*Set, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("jwks: no URL")
	}
	for _, u := range cfg.URLs {
		if err := CheckURL(u); err != nil {
			return nil, fmt.Errorf("jwks: %w", err)
		}
	}
	cfg.Refresh = cmp.Or(cfg.Refresh, DefaultRefresh)
	cfg.UnknownKIDEvery = cmp.Or(cfg.UnknownKIDEvery, DefaultUnknownKIDEvery)
	cfg.FetchTimeout = cmp.Or(cfg.FetchTimeout, DefaultFetchTimeout)
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.FetchTimeout}
	}
	s := &Set{ctx: ctx, fetchTimeout: cfg.FetchTimeout, log: cmp.Or(cfg.Logger, slog.Default()), down: map[string]error{}}
	stores := map[string]jwkset.Storage{}
	for _, u := range cfg.URLs {
		s.down[u] = errNotFetched
		cache := fetchRecorder{Storage: jwkset.NewMemoryStorage(), set: s, url: u}
		s.caches = append(s.caches, cache.Storage)
		st, err := jwkset.NewStorageFromHTTP(u, jwkset.HTTPClientStorageOptions{
			Client:                    cfg.Client,
			Ctx:                       ctx,
			HTTPTimeout:               cfg.FetchTimeout,
			NoErrorReturnFirstHTTPReq: true,
			RefreshErrorHandler:       func(ctx context.Context, err error) { s.failed(u, err) },
			RefreshInterval:           cfg.Refresh,
			Storage:                   cache,
		})
		if err != nil {
			return nil, fmt.Errorf("jwks %s: %w", u, err)
		}
		stores[u] = st
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: stores,
		// Tokens with unknown kids share one refresh per UnknownKIDEvery; a
		// token waits for the next one only if it comes within FetchTimeout
		// (Keyfunc's deadline), otherwise it is refused at once.
		RefreshUnknownKID: rate.NewLimiter(rate.Every(cfg.UnknownKIDEvery), 1),
	})
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	// Keys marked for encryption are not for verifying signatures.
	s.kf, err = keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: client, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	return s, nil
}

// CheckURL reports whether u can be a JWK Set endpoint: an absolute http or
// https URL.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", u)
	}
	return nil
}

// Algorithms are the JWS algorithms a key of a set may verify; which of
// them one key takes is decided per key (Keyfunc). No HMAC, no "none".
func (s *Set) Algorithms() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

var (
	errNoKID     = errors.New("a token verified by a JWK Set needs a kid")
	errAlgForKey = errors.New("the token's alg is not one its key may verify")
)

// Keyfunc is the jwt.Keyfunc of a token signed by an identity provider: the
// public key its kid names. The key's "alg", when the set gives one, must be
// the token's; otherwise the key's type decides (RSA: RS* and PS*; an EC key:
// the ES algorithm of its curve; Ed25519: EdDSA). A kid in no cached set
// causes at most one refresh (rate-limited across all tokens); still
// unknown, it is an error, and a *task.Error with CodeUnavailable when a set
// could not be fetched the last time it was tried, since the key may be in it.
func (s *Set) Keyfunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header[jwkset.HeaderKID].(string)
	if kid == "" {
		return nil, errNoKID
	}
	// The request's context is not used: a client that goes away must not
	// cut off a fetch, which would count as the endpoint being down.
	ctx, cancel := context.WithTimeout(s.ctx, s.fetchTimeout)
	defer cancel()
	key, err := s.kf.KeyfuncCtx(ctx)(t)
	if err != nil {
		if s.cached(ctx, kid) {
			return nil, err
		}
		if down := s.downErr(); down != nil {
			return nil, &task.Error{Code: task.CodeUnavailable,
				Message: "the identity provider's keys could not be fetched; try again shortly", Err: errors.Join(err, down)}
		}
		return nil, err
	}
	if !algFits(t.Method.Alg(), key) {
		return nil, fmt.Errorf("%w: %s with %T", errAlgForKey, t.Method.Alg(), key)
	}
	return key, nil
}

// algFits reports whether key, by its type, may verify alg.
func algFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return k.N.BitLen() >= minRSABits && slices.Contains([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}, alg)
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return alg == "ES256"
		case elliptic.P384():
			return alg == "ES384"
		case elliptic.P521():
			return alg == "ES512"
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false // []byte (an "oct" key) above all: never HMAC
}

// cached reports whether kid is in a cached set, without fetching.
func (s *Set) cached(ctx context.Context, kid string) bool {
	for _, c := range s.caches {
		if _, err := c.KeyRead(ctx, kid); err == nil {
			return true
		}
	}
	return false
}

// downErr is the error of a set whose last fetch failed, if any.
func (s *Set) downErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for u, err := range s.down {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

func (s *Set) failed(u string, err error) {
	if s.ctx.Err() != nil {
		return // shutting down
	}
	s.mu.Lock()
	s.down[u] = err
	s.mu.Unlock()
	s.log.Warn("JWKS fetch failed: tokens whose key is not cached answer unavailable until a fetch succeeds; cached keys keep working",
		"url", u, "err", err)
}

func (s *Set) fetched(u string, keys int) {
	s.mu.Lock()
	_, wasDown := s.down[u]
	delete(s.down, u)
	s.mu.Unlock()
	if wasDown {
		s.log.Info("JWKS fetched", "url", u, "keys", keys)
	}
}

// fetchRecorder is the cache of one URL. jwkset replaces its keys only
// after a fetch that succeeded, which is how the Set learns of one (a
// failure it learns from RefreshErrorHandler).
type fetchRecorder struct {
	jwkset.Storage
	set *Set
	url string
}

func (r fetchRecorder) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	if err := r.Storage.KeyReplaceAll(ctx, given); err != nil {
		return err
	}
	r.set.fetched(r.url, len(given))
	return nil
}
