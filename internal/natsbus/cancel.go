package natsbus

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// RequestCancel tells whichever runner holds taskID to stop it. It is a core
// publish, so at most once: the cancel is already recorded in Postgres, and a
// runner that misses this message learns of it at its next heartbeat. ctx
// carries only the trace context (the gateway's cancel span) to the runner.
func (b *Bus) RequestCancel(ctx context.Context, taskID string) error {
	if err := checkToken(taskID); err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	msg := &nats.Msg{Subject: CancelSubject(taskID), Header: injectTrace(ctx, nil)}
	if err := b.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("request cancel of task %s: %w", taskID, err)
	}
	return nil
}

// SubscribeCancels calls fn with the task id of every cancel request, for all
// tasks; a runner ignores those of tasks it does not hold. fn is called in
// order, one call at a time, with a context that carries the request's trace
// context, if it had one.
func (b *Bus) SubscribeCancels(fn func(ctx context.Context, taskID string)) (unsubscribe func() error, err error) {
	return b.subscribe(CancelsSubjects, func(m *nats.Msg) {
		fn(extractTrace(context.Background(), m.Header), strings.TrimPrefix(m.Subject, cancelPrefix))
	}, nil, true)
}
