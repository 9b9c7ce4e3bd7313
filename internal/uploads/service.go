// Package uploads is Tether's side of PROTOCOL.md section 10: resumable
// uploads with the tus 1.0 protocol (creation, HEAD, PATCH, termination),
// served by tusd's handler on Tether's own data store, and the download of a
// finished upload. The caller (the gateway) authenticates each request and
// names its user; this package enforces ownership (another user's upload is
// not found), the size limit (413 before a byte is stored), file names, and
// expiry of uploads no message holds.
//
// Where things live: the bytes in Blobs (a local directory by default),
// everything else in Postgres (task.UploadStore): owner, name, type, size,
// offset, expiry, and once finished the SHA-256 and the text of a text file,
// which is what runners read, so they never need the gateway's disk.
package uploads

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	xslog "golang.org/x/exp/slog"

	"github.com/tether-dev/tether/internal/task"
)

// Defaults of Config.
const (
	DefaultMaxSize = 20 << 20
	DefaultTTL     = 24 * time.Hour
	// segment is how many bytes of one PATCH are stored before their
	// offset is recorded, so a gateway that dies mid-request loses at most
	// this much of what it received.
	segment = 8 << 20
	// sweepBatch bounds one sweep transaction.
	sweepBatch = 100
)

// BasePath is where the tus protocol is served.
const BasePath = "/v1/uploads/"

// Config tunes the service. The zero value works.
type Config struct {
	// MaxSize is the largest upload in bytes (TETHER_MAX_UPLOAD). Default 20 MiB.
	MaxSize int64
	// TTL is how long an upload no message holds is kept after its last
	// byte arrived (TETHER_UPLOAD_TTL); then it goes, with its bytes. Default 24h.
	TTL time.Duration
	// Now is the clock of expiries. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	c.MaxSize = cmp.Or(c.MaxSize, DefaultMaxSize)
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.MaxSize < 0 || c.TTL < 0 {
		return Config{}, errors.New("uploads: max size and TTL must not be negative")
	}
	return c, nil
}

// Service serves uploads for one gateway.
type Service struct {
	cfg   Config
	store task.UploadStore
	blobs Blobs
	log   *slog.Logger
	tus   *handler.UnroutedHandler
}

// New makes the service on a store and a blob store.
func New(cfg Config, store task.UploadStore, blobs Blobs) (*Service, error) {
	if store == nil || blobs == nil {
		return nil, errors.New("uploads: a store and blobs are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, store: store, blobs: blobs, log: cfg.Logger}
	composer := handler.NewStoreComposer()
	ds := dataStore{s}
	composer.UseCore(ds)
	composer.UseTerminater(ds)
	// One gateway at a time writes an upload (tusd takes the lock for every
	// HEAD, PATCH and DELETE, and a newer request makes an older one let
	// go). Across gateways, the offset condition in Postgres keeps two
	// writers from both recording bytes.
	memorylocker.New().UseIn(composer)
	s.tus, err = handler.NewUnroutedHandler(handler.Config{
		StoreComposer:        composer,
		MaxSize:              cfg.MaxSize,
		BasePath:             BasePath,
		DisableDownload:      true, // GET is ours (owner only, with name and type)
		DisableConcatenation: true,
		// Same-origin only, like the rest of the API.
		Cors: &handler.CorsConfig{Disable: true},
		// tusd logs every request at info; what matters is logged here.
		Logger: xslog.New(xslog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	return s, nil
}

// MaxSize is the largest upload accepted.
func (s *Service) MaxSize() int64 { return s.cfg.MaxSize }

// Sweep removes the uploads that expired (never attached, given up,
// terminated, or their conversation deleted) with their bytes, and returns
// how many went.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.store.SweepUploads(ctx, sweepBatch, s.blobs.Delete)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

// expiry is when an upload no message holds goes, counted from now.
func (s *Service) expiry() time.Time { return s.cfg.Now().Add(s.cfg.TTL) }

// finish reads back an upload whose every byte is stored, hashes it, keeps
// the text of a text file, and marks it finished.
func (s *Service) finish(ctx context.Context, u task.Upload) (task.Upload, error) {
	f, err := s.blobs.Open(ctx, u.ID)
	if err != nil {
		return u, fmt.Errorf("finish upload %s: %w", u.ID, err)
	}
	defer f.Close()
	h := sha256.New()
	var head bytes.Buffer
	r := io.TeeReader(f, h)
	if u.Size <= task.MaxTextAttachmentBytes {
		r = io.TeeReader(r, &head)
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return u, fmt.Errorf("finish upload %s: read back: %w", u.ID, err)
	}
	if n != u.Size {
		return u, fmt.Errorf("finish upload %s: %d bytes stored, %d recorded", u.ID, n, u.Size)
	}
	var text *string
	if u.Size <= task.MaxTextAttachmentBytes && utf8.Valid(head.Bytes()) && bytes.IndexByte(head.Bytes(), 0) < 0 {
		t := head.String()
		text = &t
	}
	return s.store.FinishUpload(ctx, u.ID, hex.EncodeToString(h.Sum(nil)), text)
}

// ---- the user of a request ---------------------------------------------------

type userKey struct{}

// withUser names the user a request acts as; tusd passes the request's
// context values on to the data store.
func withUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}
