package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config tunes a Bus. The zero value works.
type Config struct {
	// Name is the connection name the server shows (e.g. "gateway", "runner-3").
	Name string
	// TaskRetention is how long task events stay in the log; it must outlast
	// any task. Default 48h.
	TaskRetention time.Duration
	// TaskMaxBytes bounds the log's size: past it the oldest events go
	// (maintenance purges finished tasks' events long before, see
	// maintenance.Loop.LogGrace). Default DefaultTaskMaxBytes (4 GiB); -1:
	// no bound.
	TaskMaxBytes int64
	// DispatchAckWait is how long a runner may take to claim a dispatched task
	// before JetStream hands it to another runner. Default 30s.
	DispatchAckWait time.Duration
	// ConnectTimeout bounds each connection attempt. Default 2s.
	ConnectTimeout time.Duration
	// MaxElapsed bounds all connection attempts together. Default
	// DefaultMaxElapsed (30s).
	MaxElapsed time.Duration
	// PublishAckTimeout bounds the wait for each asynchronous publish ack, so
	// a lost ack becomes an error instead of a hang. Default 10s.
	PublishAckTimeout time.Duration
	// Replicas is how many servers of a NATS cluster keep each of Tether's
	// streams (JetStream replication). 1 for a single server (the default);
	// 3 for the three-node cluster of nats.conf, so that losing one node
	// loses no event and stops nothing. An existing stream is updated to it.
	Replicas int
	// FetchWait is how long one dispatch pull waits for work; it is also how
	// long Consume may take to notice its context is done. Default 1s: an
	// idle runner asks once a second, and stops within a second of SIGTERM.
	FetchWait time.Duration
	// Logger receives warnings (dropped malformed messages, failed acks).
	// Default slog.Default().
	Logger *slog.Logger
	// WriteGate, when set, is asked before every write to the socket; false
	// drops what the client has buffered and closes the connection (it
	// reconnects by itself). A runner shuts it while any of its attempts is
	// past the point where it must go quiet, so events buffered before a
	// pause never leave after it (see gatedDialer). Plain TCP only: with a
	// tls:// URL the client's TLS runs over the gated connection.
	WriteGate func() bool
}

// Defaults of Config that are settings; internal/config declares them with
// these (TETHER_LOG_MAX_BYTES, TETHER_CONNECT_TIMEOUT, TETHER_NATS_REPLICAS).
const (
	DefaultTaskMaxBytes = 4 << 30
	DefaultMaxElapsed   = 30 * time.Second
	DefaultReplicas     = 1
)

func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, "tether")
	c.TaskRetention = cmp.Or(c.TaskRetention, 48*time.Hour)
	c.TaskMaxBytes = cmp.Or(c.TaskMaxBytes, DefaultTaskMaxBytes)
	c.DispatchAckWait = cmp.Or(c.DispatchAckWait, 30*time.Second)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, 2*time.Second)
	c.MaxElapsed = cmp.Or(c.MaxElapsed, DefaultMaxElapsed)
	c.PublishAckTimeout = cmp.Or(c.PublishAckTimeout, 10*time.Second)
	c.FetchWait = cmp.Or(c.FetchWait, time.Second)
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// maxPendingAcks bounds the asynchronous publishes awaiting an ack on one
// connection, across its Publishers.
const maxPendingAcks = 4096

// Bus is one NATS connection with the JetStream streams Tether needs. It is
// safe for concurrent use.
type Bus struct {
	cfg Config
	nc  *nats.Conn
	// onReconnect are called, each in its own goroutine, every time the
	// connection comes back after it was lost.
	reconnectMu sync.Mutex
	onReconnect []func()
	js          jetstream.JetStream
	tasks       jetstream.Stream
	dispatch    jetstream.Consumer
	log         *slog.Logger
	// router runs the handlers of every core subscription (router.go).
	router *router
	// consumersBackAt (Unix nanoseconds) is when ReadLog may try to make a
	// consumer again after one could not be made (follow.go).
	consumersBackAt atomic.Int64
}

// Connect dials url, retrying with exponential backoff until it succeeds, ctx
// ends or cfg.MaxElapsed has passed, then makes sure the streams and the
// runners consumer exist. Several processes may do this at once. Once
// connected, the client reconnects by itself for as long as the Bus is open.
func Connect(ctx context.Context, url string, cfg Config) (*Bus, error) {
	cfg = cfg.withDefaults()
	b := &Bus{cfg: cfg, log: cfg.Logger, router: newRouter()}

	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval = 100 * time.Millisecond
	policy.MaxInterval = 2 * time.Second
	policy.MaxElapsedTime = cfg.MaxElapsed
	attempts := 0
	var lastErr error
	err := backoff.Retry(func() error {
		attempts++
		lastErr = b.connectOnce(ctx, url)
		return lastErr
	}, backoff.WithContext(policy, ctx))
	if err != nil {
		b.router.close()
		if lastErr == nil {
			lastErr = err
		}
		return nil, fmt.Errorf("connect to NATS at %s: gave up after %d attempts: %w",
			RedactURL(url), attempts, lastErr)
	}
	return b, nil
}

// connectOnce makes one connection and sets up the streams on it; on any
// failure it leaves nothing open.
func (b *Bus) connectOnce(ctx context.Context, url string) error {
	opts := []nats.Option{
		nats.Name(b.cfg.Name),
		nats.Timeout(b.cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { b.reconnected() }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
				if errors.Is(err, nats.ErrSlowConsumer) {
					// Messages were dropped: the owner catches up.
					b.router.slow(sub)
				}
			}
			b.log.Warn("nats async error", "subject", subject, "err", err)
		}),
	}
	if b.cfg.WriteGate != nil {
		opts = append(opts, nats.SetCustomDialer(gatedDialer{timeout: b.cfg.ConnectTimeout, open: b.cfg.WriteGate}))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(b.cfg.PublishAckTimeout),
		jetstream.WithPublishAsyncMaxPending(maxPendingAcks),
	)
	if err != nil {
		nc.Close()
		return err
	}
	b.nc, b.js = nc, js
	if err := b.ensureStreams(ctx); err != nil {
		nc.Close()
		b.nc, b.js = nil, nil
		return err
	}
	return nil
}

// OnReconnect registers fn to run (in a goroutine of its own) whenever the
// connection comes back after it was lost. Core subscriptions are restored
// by the client, but messages published while this connection was away were
// never delivered to them: a follower of a task must catch up from the log,
// or a task that ended meanwhile would look stuck.
func (b *Bus) OnReconnect(fn func()) {
	b.reconnectMu.Lock()
	defer b.reconnectMu.Unlock()
	b.onReconnect = append(b.onReconnect, fn)
}

func (b *Bus) reconnected() {
	b.log.Info("NATS connection restored", "url", RedactURL(b.nc.ConnectedUrl()))
	b.reconnectMu.Lock()
	fns := slices.Clone(b.onReconnect)
	b.reconnectMu.Unlock()
	for _, fn := range fns {
		go fn()
	}
}

// Close drains nothing: pending asynchronous publishes that were not flushed
// are abandoned, as a crash would abandon them.
func (b *Bus) Close() {
	b.nc.Close()
	b.router.close()
}

// Ready reports whether the connection is up and JetStream answers.
func (b *Bus) Ready(ctx context.Context) (err error) {
	defer classify(&err)
	if err := b.connected(); err != nil {
		return err
	}
	if _, err := b.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	return nil
}

// Conn is the underlying connection, for what this package does not wrap.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// RedactURL hides passwords and tokens in a (comma-separated) server URL list.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "<unparsable url>"
			continue
		}
		if u.User != nil {
			u.User = url.User("redacted")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
