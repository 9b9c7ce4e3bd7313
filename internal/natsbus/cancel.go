package natsbus

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// RequestCancel tells whichever runner holds taskID to stop it. It is a core
// publish, so at most once: the cancel is already recorded in Postgres, and a
// runner that misses this message learns of it at its next heartbeat.
func (b *Bus) RequestCancel(taskID string) error {
	if err := checkToken(taskID); err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	if err := b.nc.Publish(CancelSubject(taskID), nil); err != nil {
		return fmt.Errorf("request cancel of task %s: %w", taskID, err)
	}
	return nil
}

// SubscribeCancels calls fn with the task id of every cancel request, for all
// tasks; a runner ignores those of tasks it does not hold. fn is called in
// order, one call at a time.
func (b *Bus) SubscribeCancels(fn func(taskID string)) (unsubscribe func() error, err error) {
	return b.subscribe(CancelsSubjects, func(m *nats.Msg) {
		fn(strings.TrimPrefix(m.Subject, cancelPrefix))
	}, nil, true)
}
