package postgres

import (
	"context"
	"errors"
	"fmt"
)

// errStuckSessions reports that maintenance ended a lost runner's sessions
// that held a task's row; the next round hands the task over.
var errStuckSessions = errors.New("the task is handed over next round")

// A runner frozen in the middle of a write (SIGSTOP, a stalled VM) can hold
// its task's row lock for as long as it stays frozen: with Postgres's
// extended protocol a statement runs as soon as its Execute arrives, and
// its implicit transaction only ends with the Sync that the frozen process
// has not sent yet, so no idle-in-transaction timeout applies. Maintenance
// takes expired leases with FOR UPDATE SKIP LOCKED, so such a task would
// never be handed over. Runner sessions therefore carry an application_name
// naming their runner, and maintenance ends the sessions of the runner
// whose lease expired when they have held a transaction open for half a
// lease: a runner's own transactions are far shorter, and a runner that has
// not renewed its lease for a whole lease is lost anyway.

// runnerAppPrefix starts the application_name of a runner's sessions.
const runnerAppPrefix = "tether-runner "

// maxAppName is Postgres's limit on application_name (NAMEDATALEN - 1);
// longer names are cut, so the comparison cuts too.
const maxAppName = 63

// RunnerApplicationName is the application_name of runner id's sessions
// (Config.ApplicationName).
func RunnerApplicationName(runnerID string) string {
	name := runnerAppPrefix + runnerID
	if len(name) > maxAppName {
		name = name[:maxAppName]
	}
	return name
}

// endStuckSessions ends the sessions of the runner that held r when they
// have had a transaction open for half a lease, if r is still that attempt
// at that seq with its lease expired (so it was skipped because of a lock,
// not because it changed). It reports how many sessions it ended.
func (s *Store) endStuckSessions(ctx context.Context, r taskRow) (int, error) {
	if r.RunnerID == "" {
		return 0, nil
	}
	var ended int
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid))
		FROM pg_stat_activity a
		WHERE a.application_name = $1 AND a.pid <> pg_backend_pid()
		  AND a.xact_start < now() - make_interval(secs => $2)
		  AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = $3 AND t.status = 'running'
		              AND t.attempt = $4 AND t.seq = $5 AND t.lease_until < $6)`,
		RunnerApplicationName(r.RunnerID), s.cfg.Lease.Seconds()/2, r.ID, r.Attempt, r.Seq, s.now()).Scan(&ended)
	if err != nil {
		return 0, fmt.Errorf("end stuck sessions of runner %q: %w", r.RunnerID, err)
	}
	return ended, nil
}
