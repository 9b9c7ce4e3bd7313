package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// gatewaysOf names the gateway each connection of tb reached through the
// balancer, in order ("?" for one the balancer did not route).
func (s *system) gatewaysOf(tb *tab) []string {
	tb.mu.Lock()
	local := append([]string(nil), tb.local...)
	tb.mu.Unlock()
	var out []string
	for _, l := range local {
		out = append(out, cmpOr(s.lb.backendOf(l), "?"))
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestTwoGatewaysOneTask: the cluster form with the balancer. A tab submits
// through one gateway and another subscribes through the other one (the
// balancer sends consecutive connections to different gateways); a plain
// HTTP client repeats the submit on the second gateway (idempotent: the
// same task, not a second one) and reads it there. Both tabs must see the
// same task and every event, exact.
func TestTwoGatewaysOneTask(t *testing.T) {
	s := newSystem(t, cluster.opts(3*time.Second))
	for i := 1; i <= trials(t, 1); i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { twoGatewaysTrial(t, s) })
	}
}

func twoGatewaysTrial(t *testing.T, s *system) {
	a := newAnswer(200, 10)
	s.open(t, a, 2)
	gws := [][]string{s.gatewaysOf(a.tabs[0]), s.gatewaysOf(a.tabs[1])}
	s.notef(t, "tab-1 submitted through %v, tab-2 subscribed through %v", gws[0], gws[1])
	if len(gws[0]) != 1 || len(gws[1]) != 1 || gws[0][0] == gws[1][0] || gws[0][0] == "?" || gws[1][0] == "?" {
		t.Fatalf("the two tabs did not land on two gateways: %v", gws)
	}
	var other *gatewayProc
	for _, g := range s.gateways {
		if g.name != gws[0][0] {
			other = g
		}
	}

	// The submit again, over HTTP on the gateway the submitting tab did not
	// use: the same task, created false.
	body, _ := json.Marshal(map[string]string{"task_id": a.taskID, "conversation_id": a.conv, "content": a.content})
	req, _ := http.NewRequest("POST", other.base()+"/v1/tasks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got wireTask
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || got.ID != a.taskID {
		t.Errorf("repeated submit on %s: %d, task %q; want 200 and task %s", other.name, resp.StatusCode, got.ID, a.taskID)
	}
	s.notef(t, "the same submit on %s over HTTP: %d, task %s, status %s, seq %d", other.name, resp.StatusCode, got.ID, got.Status, got.Seq)

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	row, _ := s.verify(t, a, expect{attempt: 1})

	// Read back on the other gateway: the finished task as Postgres has it.
	req, _ = http.NewRequest("GET", other.base()+"/v1/tasks/"+a.taskID, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got = wireTask{}
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || got.Status != "done" || got.Seq != row.Seq || got.Output != a.want {
		t.Errorf("GET on %s: %d status %s seq %d (Postgres %d), output exact %v", other.name, resp.StatusCode, got.Status, got.Seq, row.Seq, got.Output == a.want)
	}
}

// TestGatewayKilled: the cluster form with the balancer; four tabs follow
// /stream 400 25, two on each gateway. Mid-answer the gateway of tab-1 is
// SIGKILLed. Its tabs must reconnect through the balancer to the other
// gateway and resume exactly (a snapshot, then every event after it); the
// tabs on the other gateway must not notice; the answer stays on attempt 1.
// The killed gateway is started again after the answer, for the next trial.
func TestGatewayKilled(t *testing.T) {
	s := newSystem(t, cluster.opts(5*time.Second))
	for i := 1; i <= trials(t, 1); i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { gatewayKilledTrial(t, s) })
	}
}

func gatewayKilledTrial(t *testing.T, s *system) {
	a := s.submit(t, 4, 400, 25)
	s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)

	on := map[*tab]string{}
	for _, tb := range a.tabs {
		g := s.gatewaysOf(tb)
		on[tb] = g[len(g)-1]
	}
	var victim *gatewayProc
	for _, g := range s.gateways {
		if g.name == on[a.tabs[0]] {
			victim = g
		}
	}
	if victim == nil {
		t.Fatalf("tab-1's gateway %q is unknown", on[a.tabs[0]])
	}
	killAt := time.Now()
	if err := victim.kill(); err != nil {
		t.Fatal(err)
	}
	s.notef(t, "SIGKILLed %s at about 100 tokens; tabs on it: %v", victim.name, tabsOn(a, on, victim.name))

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})

	dropped := 0
	for _, tb := range a.tabs {
		gws := s.gatewaysOf(tb)
		var before, after time.Time
		var drops int
		tb.view(func(f *follower) {
			for _, at := range f.deltaAt {
				if !at.After(killAt) {
					before = at
				} else if after.IsZero() {
					after = at
				}
			}
		})
		tb.mu.Lock()
		drops = len(tb.drops)
		tb.mu.Unlock()
		if on[tb] == victim.name {
			dropped++
			if drops == 0 {
				t.Errorf("%s was on %s, which was killed, but never lost its connection", tb.name, victim.name)
			}
			for _, g := range gws[1:] {
				if g == victim.name {
					t.Errorf("%s reconnected to the killed %s: %v", tb.name, victim.name, gws)
				}
			}
		} else if drops != 0 {
			t.Errorf("%s on the surviving %s lost its connection %d times", tb.name, on[tb], drops)
		}
		if before.IsZero() || after.IsZero() {
			continue
		}
		pause := after.Sub(before)
		if on[tb] == victim.name {
			s.tally.time("pause on each tab of the killed gateway (last delta before the kill to the first after, through the other gateway)", pause)
		} else {
			s.tally.time("pause on each tab of the surviving gateway", pause)
		}
		s.notef(t, "%s: gateways %v, pause %v", tb.name, gws, pause.Round(time.Millisecond))
	}
	if dropped == 0 {
		t.Errorf("no tab was on the killed gateway")
	}
	s.notef(t, "balancer: connections per gateway %v", s.lb.stats())
	if err := s.startGateway(victim); err != nil {
		t.Fatal(err)
	}
}

func tabsOn(a *answer, on map[*tab]string, gw string) []string {
	var out []string
	for _, tb := range a.tabs {
		if on[tb] == gw {
			out = append(out, tb.name)
		}
	}
	return out
}
