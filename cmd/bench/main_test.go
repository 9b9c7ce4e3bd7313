package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The raw baseline server runs this binary again (see rawServer).
	if rawServer() {
		return
	}
	os.Exit(m.Run())
}

// TestSmoke runs the whole load program with small sizes: every scenario,
// both sides, the table. It checks that the program works, not speed.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the smoke run builds and starts the programs")
	}
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set (./scripts/with-test-pg.sh go test ./cmd/bench)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"-smoke", "-out", ""}, os.Getenv, &out, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	for _, want := range []string{"answers streaming at once", "flat out", "reconnect and resubscribe", "closed-loop", "idle tab", "end to end", "on disk",
		"compat layer, live", "compat layer, replay", "compat layer, a fast", "resumed Responses stream"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no %q row:\n%s", want, out.String())
		}
	}
}
