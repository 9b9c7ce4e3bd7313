// Package faults holds Tether's process-level fault harness. Its tests (run
// with TEST_DATABASE_URL set, e.g. ./scripts/with-test-pg.sh go test
// ./internal/faults/ -count=1 -v) build the real gateway, runner and
// nats-server binaries, start them as separate processes on 127.0.0.1, inject
// real faults (SIGKILL, SIGSTOP/SIGCONT, a runner cut off from Postgres, a
// NATS outage, a gateway restart with its embedded NATS) and check, token by
// token, that every tab, the Postgres row and the JetStream log end with the
// exact answer under the rules of PROTOCOL.md 1.1 (attempt on every event,
// continuation with keep, stale attempts dropped).
//
// TETHER_FAULT_TRIALS=N runs each scenario N times (defaults are small so
// the package fits in `make test`); -short skips the longest scenario.
// Process logs of a failed test are copied to test-artifacts/faults/.
//
// Scenarios do not run in parallel with each other: each one is a handful of
// processes, and the CI machines have two cores.
package faults
