package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// taskDuplicates is the window in which a re-published event (same task
	// and seq) is dropped: long enough for a runner to retry after a lost ack.
	taskDuplicates = 2 * time.Minute
	// dispatchDuplicates is the window in which a second dispatch of the same
	// attempt is dropped. A sweeper that dispatches again must wait longer
	// than this, or its dispatch does nothing.
	dispatchDuplicates = 20 * time.Second
)

// ensureStreams creates or updates the streams and the runners consumer.
// JetStream answers a create with an identical config as a success, so
// processes starting together all succeed.
func (b *Bus) ensureStreams(ctx context.Context) error {
	tasks, err := b.ensureStream(ctx, jetstream.StreamConfig{
		Name:        TasksStream,
		Description: "Tether task events, one subject per task",
		Subjects:    []string{TasksSubjects},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      b.cfg.TaskRetention,
		MaxBytes:    b.cfg.TaskMaxBytes,
		Storage:     jetstream.FileStorage,
		Duplicates:  min(taskDuplicates, b.cfg.TaskRetention),
		Discard:     jetstream.DiscardOld,
		Replicas:    b.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("ensure stream %s: %w", TasksStream, err)
	}
	if _, err := b.ensureStream(ctx, jetstream.StreamConfig{
		Name:        DispatchStream,
		Description: "Tether tasks waiting for a runner",
		Subjects:    []string{DispatchSubject},
		Retention:   jetstream.WorkQueuePolicy,
		// A dispatch older than any task is for a task long failed.
		MaxAge:     b.cfg.TaskRetention,
		Storage:    jetstream.FileStorage,
		Duplicates: min(dispatchDuplicates, b.cfg.TaskRetention),
		Replicas:   b.cfg.Replicas,
	}); err != nil {
		return fmt.Errorf("ensure stream %s: %w", DispatchStream, err)
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, DispatchStream, jetstream.ConsumerConfig{
		Durable:       RunnersConsumer,
		Description:   "all runners pull from here",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.DispatchAckWait,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("ensure consumer %s: %w", RunnersConsumer, err)
	}
	b.tasks, b.dispatch = tasks, cons
	return nil
}

// ensureStream creates the stream cfg names, or updates it when it differs
// from cfg in what Tether sets. A stream that is as it should be is left
// alone: an update racing a consumer's creation on the same stream (another
// process starting at the same time) is a data race inside nats-server
// 2.15.2 (filestore's UpdateConfig against ConsumerStore), and it is work
// for nothing.
func (b *Bus) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := b.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return b.js.CreateOrUpdateStream(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	if sameStream(s.CachedInfo().Config, cfg) {
		return s, nil
	}
	return b.js.UpdateStream(ctx, cfg)
}

// sameStream reports whether have is want in every field ensureStreams sets
// (the server fills in the others).
func sameStream(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Retention == want.Retention && have.MaxAge == want.MaxAge &&
		cmp.Or(have.MaxBytes, -1) == cmp.Or(want.MaxBytes, -1) && have.Storage == want.Storage &&
		have.Duplicates == want.Duplicates && have.Discard == want.Discard &&
		cmp.Or(have.Replicas, 1) == cmp.Or(want.Replicas, 1)
}

// PurgeTaskLog removes every event of taskID from the log: maintenance calls
// it for tasks finished a grace period ago, whose snapshot in Postgres is
// final, so the log's disk holds running and recent tasks only.
func (b *Bus) PurgeTaskLog(ctx context.Context, taskID string) (err error) {
	defer classify(&err)
	if err := checkToken(taskID); err != nil {
		return fmt.Errorf("purge task log: %w", err)
	}
	if err := b.tasks.Purge(ctx, jetstream.WithPurgeSubject(TaskSubject(taskID))); err != nil {
		return fmt.Errorf("purge the log of task %s: %w", taskID, err)
	}
	return nil
}
