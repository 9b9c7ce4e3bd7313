package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Dial opens the store like Open, retrying with exponential backoff for up
// to maxWait: a gateway or runner started together with its database waits
// for it instead of failing at once. onRetry, if set, hears each failure.
func Dial(ctx context.Context, databaseURL string, cfg Config, maxWait time.Duration, onRetry func(error)) (*Store, error) {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval = 100 * time.Millisecond
	policy.MaxInterval = 2 * time.Second
	policy.MaxElapsedTime = maxWait
	var store *Store
	attempt := func() error {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := Open(attemptCtx, databaseURL, cfg)
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
	return store, nil
}
