package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// outage is how long NATS stays down in TestNATSOutage: longer than the
// 10-12 s that made a runner before 1.1 abandon its attempt.
const outage = 15 * time.Second

// natsLease is the lease of the NATS scenarios: well under the outage, so
// the runner must keep it in Postgres throughout and any attempt 2 would
// show.
const natsLease = 5 * time.Second

// TestNATSOutage: /stream 600 25; mid-answer every nats-server is
// SIGKILLed (the one server, or all three nodes of the cluster), stays down
// for 15 s and comes back on the same ports and stores. The answer must
// ride through on attempt 1 (no attempt 2 in Postgres, in the log or on any
// tab) and end exact everywhere; the gateways stay up and their tabs stay
// connected or resubscribe.
func TestNATSOutage(t *testing.T) {
	slowScenario(t, "a 15 s NATS outage, about 30 s a trial")
	forms(t, cluster, func(t *testing.T, f form) {
		s := newSystem(t, f.opts(natsLease))
		for i := 1; i <= trials(t, 1); i++ {
			s.tally.trial()
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { natsDownTrial(t, s, outage) })
		}
	})
}

// TestNATSClusterRestart: all three nodes of the cluster SIGKILLed
// mid-answer and started again at once (a crash of the whole cluster, or a
// careless restart of every node): a pause, then the same attempt carries
// on, exact.
func TestNATSClusterRestart(t *testing.T) {
	slowScenario(t, "restarts the whole NATS cluster")
	s := newSystem(t, cluster.opts(natsLease))
	for i := 1; i <= trials(t, 1); i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { natsDownTrial(t, s, 0) })
	}
}

// natsDownTrial kills every nats-server at about 150 tokens of /stream 600
// 25, keeps them down for down, starts them again and checks the answer.
func natsDownTrial(t *testing.T, s *system, down time.Duration) {
	a := s.submit(t, 3, 600, 25)
	s.holder(t, a.taskID)
	a.waitTokens(t, 150, 30*time.Second)

	killAt := time.Now()
	if err := s.killNATS(); err != nil {
		t.Fatal(err)
	}
	s.notef(t, "SIGKILLed every nats-server (%d) at about 150 tokens; down for %v", len(s.nats), down)
	if down > 0 {
		// The outage is the scenario itself: NATS stays down this long
		// whatever the processes do. A timer, not a synchronisation.
		timer := time.NewTimer(down)
		<-timer.C
	}
	backAt := time.Now()
	if err := s.startNATSNodes(s.nats...); err != nil {
		t.Fatal(err)
	}
	healthy := time.Since(backAt)
	s.notef(t, "every nats-server started again on the same ports and stores %v after the kill; all healthy %v later",
		backAt.Sub(killAt).Round(time.Millisecond), healthy.Round(time.Millisecond))
	s.tally.time("restart to every node healthy (/healthz 200)", healthy)

	if !a.waitDone(t, 90*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	reportPauses(t, s, a, killAt, backAt, "NATS killed", "NATS restarted")
}

// TestNATSNodeKilled: the cluster form; mid-answer one node is SIGKILLed:
// on odd trials the leader of TETHER_TASKS (the stream every event is
// written to), on even ones the node the runner holding the task is
// connected to. With three replicas the stream stays available: the answer
// must go on, on the same attempt, while the node is down (the harness
// waits for 100 more tokens on every tab before it starts the node again)
// and must not pause for long (bound below); then the node comes back and
// must become current again.
func TestNATSNodeKilled(t *testing.T) {
	s := newSystem(t, cluster.opts(natsLease))
	for i := 1; i <= trials(t, 1); i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { nodeKilledTrial(t, s, i%2 == 1) })
	}
}

// nodePauseBound is the longest a tab may go without a delta while one
// node of the three is down. Measured, tabs see no pause (a normal gap
// between two deltas) in almost every trial, whether or not the killed
// node led the stream or held the gateway's or the runner's connection: a
// gateway whose connection moved passes live events while it looks in the
// log, and a runner whose acks stop publishes again after a second and
// echoes what came after. The bound sits above a Raft election (4-9 s,
// nats-server's timeouts, not configurable) with room for a loaded 2-core
// machine: it catches a runner or gateway that stalls for good or gives
// the attempt up (docs/RELIABILITY.md has the figures).
const nodePauseBound = 15 * time.Second

// nodeSlowPause is a pause far above the usual (a normal gap between two
// deltas, about 30 ms) though within the bound: it was seen twice in 68
// trials (1.2 s and 7.6 s, the runner's node killed) and not found again
// with every log kept, so the harness keeps the logs of a trial that shows
// one.
const nodeSlowPause = time.Second

func nodeKilledTrial(t *testing.T, s *system, leader bool) {
	a := s.submit(t, 3, 400, 25)
	holder, _ := s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)

	leaderName, err := s.streamLeader()
	if err != nil {
		t.Fatal(err)
	}
	runnerNode := s.connectedTo("runner " + holder.id)
	victim := s.natsNodeNamed(leaderName)
	if !leader {
		victim = runnerNode
	}
	if victim == nil {
		t.Fatalf("no node found to kill (leader %q, %s's node %v)", leaderName, holder.id, runnerNode)
	}
	var roles []string
	if victim.name == leaderName {
		roles = append(roles, "the leader of "+tasksStream)
	}
	isMeta := victim.name == s.metaLeader()
	if isMeta {
		roles = append(roles, "the JetStream meta leader")
	}
	if victim == runnerNode {
		roles = append(roles, "the node of "+holder.id+" (holding the task)")
	}
	gwConns := s.connectionsOn(victim, "tether-gateway")
	roles = append(roles, fmt.Sprintf("%d gateway connection(s)", gwConns))
	why := strings.Join(roles, ", ")
	// A gateway whose connection was on the node says so when it is back
	// on another one.
	logFrom := map[string]int{}
	for _, g := range s.gateways {
		logFrom[g.name] = g.log.size()
	}
	killAt := time.Now()
	if err := victim.kill(); err != nil {
		t.Fatal(err)
	}
	s.notef(t, "SIGKILLed %s, %s, at about 100 tokens", victim.name, why)
	// The answer goes on without the node: 100 more tokens on every tab.
	a.waitTokens(t, 200, 60*time.Second)
	startAt := time.Now()
	if err := s.startNATSNodes(victim); err != nil {
		t.Fatal(err)
	}
	current := time.Since(startAt)
	s.notef(t, "%s started again on the same ports and store; healthy (current) %v later", victim.name, current.Round(time.Millisecond))
	s.tally.time("node restart to /healthz 200 (current again)", current)

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	for _, tb := range a.tabs {
		var times []time.Time
		var before time.Time
		tb.view(func(f *follower) {
			for _, at := range f.deltaAt {
				switch {
				case !at.After(killAt):
					before = at
				case at.Before(startAt):
					times = append(times, at)
				}
			}
		})
		longest, from := largestPause(append([]time.Time{before}, times...))
		s.notef(t, "%s: longest pause while %s was down %v, from %v after the kill", tb.name, victim.name,
			longest.Round(time.Millisecond), from.Sub(killAt).Round(time.Millisecond))
		gws := s.gatewaysOf(tb)
		gw := gws[len(gws)-1]
		var moved bool
		for _, g := range s.gateways {
			if g.name == gw {
				moved = len(g.log.lines(logFrom[g.name], "NATS connection restored")) > 0
			}
		}
		what := "longest pause on each tab while the node was down: "
		if moved {
			what += "the tab's gateway reconnected (it was on the killed node), "
		} else {
			what += "the tab's gateway kept its connection, "
		}
		if victim.name == leaderName || isMeta {
			what += "the killed node led the stream or the meta group"
		} else {
			what += "the killed node led nothing"
		}
		s.tally.time(what, longest)
		if longest > nodeSlowPause {
			s.keepLogs(t, "%s paused %v while %s was down", tb.name, longest.Round(time.Millisecond), victim.name)
		}
		if longest > nodePauseBound {
			t.Errorf("%s: no delta for %v from %v after the kill of %s (bound %v)", tb.name,
				longest.Round(time.Millisecond), from.Sub(killAt).Round(time.Millisecond), victim.name, nodePauseBound)
		}
	}
}
