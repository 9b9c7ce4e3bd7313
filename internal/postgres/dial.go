package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Dial opens the store like Open, retrying the connection with exponential
// backoff for up to maxWait: a gateway or runner started together with its
// database waits for it instead of failing at once. onRetry, if set, hears
// each failure. Each connection attempt is bounded on its own (a server that
// accepts TCP and then hangs); the migration step that follows is not part
// of any attempt and is not retried: it has cfg.MigrateTimeout, so a
// migration that takes minutes completes instead of being rolled back by
// every attempt in turn.
func Dial(ctx context.Context, databaseURL string, cfg Config, maxWait time.Duration, onRetry func(error)) (*Store, error) {
	return dial(ctx, databaseURL, cfg, maxWait, connectTimeout, onRetry)
}

func dial(ctx context.Context, databaseURL string, cfg Config, maxWait, attemptTimeout time.Duration, onRetry func(error)) (*Store, error) {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval = 100 * time.Millisecond
	policy.MaxInterval = 2 * time.Second
	policy.MaxElapsedTime = maxWait
	var store *Store
	attempt := func() error {
		attemptCtx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		s, err := connect(attemptCtx, databaseURL, cfg)
		if err == nil {
			if err = s.Ping(attemptCtx); err != nil {
				s.Close()
			}
		}
		if err != nil {
			return err
		}
		store = s
		return nil
	}
	notify := func(err error, _ time.Duration) {
		if onRetry != nil {
			onRetry(err)
		}
	}
	if err := backoff.RetryNotify(attempt, backoff.WithContext(policy, ctx), notify); err != nil {
		return nil, fmt.Errorf("cannot reach Postgres (check DATABASE_URL) within %v: %w", maxWait, err)
	}
	if err := store.prepareSchema(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return store, nil
}
