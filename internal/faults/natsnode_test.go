package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/eventually"
)

// natsNode is one nats-server of the system under test: the standalone
// server, or one node of the three-node cluster. Every node runs the
// deployers' nats.conf with only its addresses and store directory
// rewritten (natsConf), so the harness proves the file docs/deploy.md
// hands out, not a look-alike.
type natsNode struct {
	*proc
	name        string // server_name, from TETHER_NATS_NODE: nats-1, nats-2, nats-3
	port        int    // client port
	clusterPort int    // route port; 0 for a standalone server
	httpPort    int    // monitoring port (/healthz, /connz)
	store       string // JetStream store_dir
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// startNATS writes a config file per node in the test's directory and
// starts the nodes: one standalone server, or the three-node cluster (each
// node routing to all three, as nats.conf does). It returns once every
// node is healthy (healthz: JetStream up and, in a cluster, current with
// the meta leader), before any gateway or runner creates the streams.
func (s *system) startNATS(nodes int) {
	s.t.Helper()
	src, err := os.ReadFile(filepath.Join(s.bins.root, "nats.conf"))
	if err != nil {
		s.t.Fatalf("read nats.conf: %v", err)
	}
	for i := 1; i <= nodes; i++ {
		n := &natsNode{
			name:     fmt.Sprintf("nats-%d", i),
			port:     fixedPort(s.t),
			httpPort: fixedPort(s.t),
			store:    filepath.Join(s.dir, fmt.Sprintf("nats-%d-store", i)),
		}
		if nodes > 1 {
			n.clusterPort = fixedPort(s.t)
		}
		s.nats = append(s.nats, n)
	}
	var urls []string
	for _, n := range s.nats {
		conf, err := natsConf(string(src), n, s.nats)
		if err != nil {
			s.t.Fatalf("nats.conf for %s: %v", n.name, err)
		}
		path := filepath.Join(s.dir, n.name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			s.t.Fatal(err)
		}
		n.proc = s.newProc(n.name, s.bins.nats, []string{"-c", path}, environ("TETHER_NATS_NODE="+n.name))
		urls = append(urls, n.url())
	}
	s.natsURL = strings.Join(urls, ",")
	if err := s.startNATSNodes(s.nats...); err != nil {
		s.t.Fatal(err)
	}
}

// natsConf is nats.conf for node n of all: the client, monitoring and
// route addresses become 127.0.0.1 ports of n's own, the store directory
// one under the test's directory and the routes the other nodes' ports.
// Everything else (sync_interval: always, max_file_store, the cluster's
// name) is the file as it stands. Every rewritten text must be found
// exactly once, so a change to nats.conf that the harness does not follow
// fails here, loudly, rather than testing something else. A standalone
// server drops the cluster block, as nats.conf tells a one-node deployer.
func natsConf(src string, n *natsNode, all []*natsNode) (string, error) {
	type rewrite struct{ old, new string }
	rw := []rewrite{
		{"listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", n.port)},
		{"http: 0.0.0.0:8222", fmt.Sprintf("http: 127.0.0.1:%d", n.httpPort)},
		{`store_dir: "/var/lib/tether/nats"`, fmt.Sprintf("store_dir: %q", n.store)},
	}
	if len(all) > 1 {
		rw = append(rw, rewrite{"listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", n.clusterPort)})
		for i, o := range all {
			rw = append(rw, rewrite{fmt.Sprintf("nats-route://nats-%d:6222", i+1), fmt.Sprintf("nats-route://127.0.0.1:%d", o.clusterPort)})
		}
	} else {
		start := strings.Index(src, "\ncluster {")
		end := -1
		if start >= 0 {
			end = strings.Index(src[start:], "\n}")
		}
		if end < 0 {
			return "", fmt.Errorf("no cluster { … } block found to drop")
		}
		src = src[:start] + src[start+end+2:]
	}
	for _, r := range rw {
		if c := strings.Count(src, r.old); c != 1 {
			return "", fmt.Errorf("%q occurs %d times in nats.conf, want once: the harness's rewrite no longer fits the file", r.old, c)
		}
		src = strings.Replace(src, r.old, r.new, 1)
	}
	if !strings.Contains(src, "sync_interval: always") {
		return "", fmt.Errorf("nats.conf no longer sets sync_interval: always")
	}
	return src, nil
}

// startNATSNodes starts the given nodes (again, on the same ports and
// stores), all at once as a cluster's nodes must be, and waits until each
// one is healthy.
func (s *system) startNATSNodes(nodes ...*natsNode) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := n.log.size()
			if err := n.start(); err != nil {
				errs[i] = err
				return
			}
			if _, err := n.log.waitFrom(from, 30*time.Second, "Server is ready"); err != nil {
				errs[i] = fmt.Errorf("%s: %w\n%s", n.name, err, n.log.tail(20))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return s.waitNATSHealthy(60*time.Second, nodes...)
}

// waitNATSHealthy waits until every node's /healthz answers 200: the
// server is up with JetStream and, in a cluster, is current with the meta
// leader and holds a current copy of every stream and consumer: what
// docs/deploy.md tells an operator to wait for before restarting the next
// node.
func (s *system) waitNATSHealthy(timeout time.Duration, nodes ...*natsNode) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for _, n := range nodes {
		var last string
		err := eventually.Within(timeout, n.name+" /healthz 200", func() (bool, error) {
			if e := n.exitError(); e != nil {
				return false, fmt.Errorf("%s exited: %v", n.name, e)
			}
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort))
			if err != nil {
				last = err.Error()
				return false, nil
			}
			var body struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, body.Error)
			return resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			return fmt.Errorf("%w (last answer: %s)\n%s", err, last, n.log.tail(20))
		}
	}
	return nil
}

// killNATS SIGKILLs the given nodes (all of them when none is given), one
// right after the other.
func (s *system) killNATS(nodes ...*natsNode) error {
	if len(nodes) == 0 {
		nodes = s.nats
	}
	for _, n := range nodes {
		if err := n.kill(); err != nil {
			return err
		}
	}
	return nil
}

// natsNodeNamed finds a node by its server_name.
func (s *system) natsNodeNamed(name string) *natsNode {
	for _, n := range s.nats {
		if n.name == name {
			return n
		}
	}
	return nil
}

// streamLeader is the server_name of the node leading TETHER_TASKS, the
// stream every event is written to, asked through any live node.
func (s *system) streamLeader() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.natsURL, nats.Timeout(5*time.Second), nats.Name("faults stream info"))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, tasksStream)
	if err != nil {
		return "", err
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader now", tasksStream)
	}
	return info.Cluster.Leader, nil
}

// metaLeader is the server_name of the JetStream meta leader (the node
// that decides where streams and consumers live), from a live node's /jsz.
func (s *system) metaLeader() string {
	client := &http.Client{Timeout: 2 * time.Second}
	for _, n := range s.nats {
		if !n.running() {
			continue
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", n.httpPort))
		if err != nil {
			continue
		}
		var body struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err == nil && body.Meta.Leader != "" {
			return body.Meta.Leader
		}
	}
	return ""
}

// connectedTo is the node a client connection named name is on, found in
// each live node's /connz; nil when none lists it.
func (s *system) connectedTo(name string) *natsNode {
	for _, n := range s.nats {
		if s.connectionsOn(n, name) > 0 {
			return n
		}
	}
	return nil
}

// connectionsOn counts the client connections named name on node n (0
// when it does not answer).
func (s *system) connectionsOn(n *natsNode, name string) int {
	if !n.running() {
		return 0
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/connz?limit=1024", n.httpPort))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var body struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return 0
	}
	c := 0
	for _, conn := range body.Connections {
		if conn.Name == name {
			c++
		}
	}
	return c
}

// natsSummary is one line naming each node with its ports, for logs.
func (s *system) natsSummary() string {
	var parts []string
	for _, n := range s.nats {
		p := n.name + " client " + strconv.Itoa(n.port)
		if n.clusterPort != 0 {
			p += " route " + strconv.Itoa(n.clusterPort)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
