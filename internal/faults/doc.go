// Package faults holds Tether's process-level fault harness. Its tests (run
// with TEST_DATABASE_URL set, e.g. ./scripts/with-test-pg.sh go test
// ./internal/faults/ -count=1 -v) build the real gateway, runner and
// nats-server binaries (the last from the pinned module), start them as
// separate processes on 127.0.0.1, inject real faults and check, token by
// token, that every tab, the Postgres row and the JetStream log end with the
// exact answer under the rules of PROTOCOL.md 1.1 (attempt on every event,
// continuation with keep, stale attempts dropped), and that no tab received
// an event lost, doubled, reordered or of a stale attempt.
//
// The systems under test (forms_test.go): "single", one nats-server and two
// gateways and runners; "cluster", the form of docs/deploy.md: the
// three-node cluster of nats.conf (each node runs that file with only its
// addresses rewritten) with streams of three replicas, two gateways behind
// a round-robin TCP balancer, two runners; and the `make run` form, one
// gateway embedding NATS. All share one Postgres (a schema per test on
// TEST_DATABASE_URL), except the Postgres restart, which runs its own
// cluster with scripts/pg.sh.
//
// Scenarios: a runner SIGKILLed, SIGSTOPped past its lease (burst and
// paced), cut off from Postgres; a gateway SIGKILLed behind the balancer, a
// submit and a subscribe through different gateways, the embedded gateway
// restarted; one NATS node killed, a 15 s outage of all of NATS, the whole
// cluster restarted; Postgres restarted; a dispatch lost after its task
// committed.
//
// By default (go test, make test) the fast subset runs: each scenario once,
// on one form. TETHER_FAULTS=all (make test-faults) adds the slow scenarios
// and runs each on every form it fits; TETHER_FAULT_TRIALS=N runs each
// scenario N times; -short skips the slow ones. Each scenario ends with one
// FIGURES line (docs/RELIABILITY.md quotes them), also written to
// test-artifacts/faults/figures.txt. Process logs of a failed test (of one
// that saw a figure far from the usual, of every test with
// TETHER_FAULT_KEEP_LOGS set) are copied to test-artifacts/faults/.
//
// Scenarios do not run in parallel with each other: each one is a handful of
// processes, and the CI machines have two cores.
package faults
