package natsbus_test

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// nats.conf is what docs/deploy.md tells deployers to run: it must parse,
// form the three-node cluster, and fsync every message before its ack.
func TestNATSConfIsAThreeNodeClusterWithSyncAlways(t *testing.T) {
	t.Setenv("TETHER_NATS_NODE", "nats-2")
	opts, err := server.ProcessConfigFile("../../nats.conf")
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if opts.ServerName != "nats-2" || !opts.JetStream || !opts.SyncAlways {
		t.Fatalf("server_name %q jetstream %v sync always %v", opts.ServerName, opts.JetStream, opts.SyncAlways)
	}
	if opts.Cluster.Name != "tether" || len(opts.Routes) != 3 {
		t.Fatalf("cluster %q with %d routes, want tether with 3", opts.Cluster.Name, len(opts.Routes))
	}
}
